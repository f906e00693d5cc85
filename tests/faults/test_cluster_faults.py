"""Faults of a run across network-namespace hosts (``scripts/cluster.sh``): a link taken down in
the middle of training, a host's ranks SIGKILLed, a link slowed 100×. Every rank ends within
30 s (or, for the slow link, the run finishes, with the right losses), the launcher exits
non-zero with ONE line naming the host and the cause, no process is left on any host, and the
last checkpoint is intact and resumes — to the single process's losses."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.netns_cluster import REPO, nntile_lab, wait_for
from tests.torch_adapter import tiny_dataset

TOL = 1e-5
# constant learning rate after warm-up (min-lr = lr), so runs of any length share it, and a
# checkpoint after every step
OPTS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--vocab-size", "64",
        "--seq-len", "16", "--batch", "4", "--batch-tile", "1", "--embd-tile", "16",
        "--vocab-tile", "32", "--eval-every", "0", "--no-progress", "--scheduler", "eager",
        "--lr", "1e-2", "--min-lr", "1e-2", "--warmup", "1", "--checkpoint-every", "1"]
ENDS_WITHIN = 30.0


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster_faults")
    tiny_dataset(d / "data")
    return d


def losses(run: Path) -> list[float]:
    with open(run / "log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r.get("loss")]


def checkpoint_step(run: Path) -> int:
    try:
        return json.loads((run / "checkpoint" / "state.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


def single(work, steps: int) -> list[float]:
    out = work / f"one{steps}"
    if not out.exists():
        proc = nntile_lab("train", "--data", work / "data", *OPTS, "--steps", steps,
                          "--ncpu", "1", "--out", out, cwd=work, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return losses(out)


class Run:
    """``nntile-lab train`` on the cluster in the background."""

    def __init__(self, cluster4, work, name, steps):
        self.out = work / name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nntile_lab.cli", "train", "--data", str(work / "data"),
             *OPTS, "--steps", str(steps), "--hostfile", cluster4.hostfile, "--out",
             str(self.out)], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "STARPU_SILENT": "1"})

    def wait(self, timeout):
        """(exit code, stderr, seconds it took)."""
        t0 = time.monotonic()
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            pytest.fail(f"the run did not end within {timeout:.0f} s of the fault:\n"
                        f"{err[-3000:]}", pytrace=False)
        return self.proc.returncode, err, time.monotonic() - t0

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


def said(err: str) -> list[str]:
    """What the launcher printed besides its first line (the mpirun line it starts)."""
    return [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("nntile-lab: /")]


def no_process_left(cluster4):
    wait_for(lambda: not any(cluster4.pids(h) for h in cluster4.hosts), 10,
             "every process on the cluster's hosts to end")


def fault_ends_every_rank(cluster4, work, name, fault, undo):
    """Start a long run, wait for its first checkpoint, apply ``fault``; the run must end
    within 30 s with one line. Returns (the line, the last checkpoint's step)."""
    run = Run(cluster4, work, name, steps=500)
    try:
        wait_for(lambda: checkpoint_step(run.out) >= 1 or run.proc.poll() is not None, 240,
                 "the run's first checkpoint")
        assert run.proc.poll() is None, run.proc.communicate()[1][-3000:]
        fault()
        code, err, took = run.wait(timeout=120)
    finally:
        run.stop()
        undo()
    assert code != 0
    assert took < ENDS_WITHIN, f"the ranks took {took:.1f} s to end:\n{err[-3000:]}"
    lines = said(err)
    assert len(lines) == 1, "\n".join(lines)[-4000:]
    no_process_left(cluster4)
    return lines[0], checkpoint_step(run.out)


def test_a_link_going_down_mid_step_ends_every_rank(cluster4, work):
    h3 = cluster4.hosts[2]
    line, step = fault_ends_every_rank(cluster4, work, "linkdown",
                                       lambda: cluster4.sh("link", h3, "down"),
                                       lambda: cluster4.sh("link", h3, "up"))
    assert line.startswith(f"nntile-lab: lost the connection to host {h3}: its network link "
                           "is down"), line
    assert f"The last checkpoint ({work / 'linkdown' / 'checkpoint'}, step {step}) is intact: " \
           f"continue with --resume {work / 'linkdown'}." in line, line
    # the surviving hosts continue from it, one more step, to the single process's losses
    proc = nntile_lab("train", "--resume", work / "linkdown", "--steps", step + 1,
                      "--hostfile", cluster4.hostfile_with(cluster4.hosts[:2]), "--no-progress",
                      cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(losses(work / "linkdown"), single(work, step + 1), rtol=0,
                               atol=TOL)


def test_a_hosts_ranks_killed_end_every_rank(cluster4, work):
    h2 = cluster4.hosts[1]
    line, step = fault_ends_every_rank(cluster4, work, "killed",
                                       lambda: cluster4.sh("kill", h2), lambda: None)
    assert line.startswith(f"nntile-lab: rank 1 on host {h2} was killed by signal 9"), line
    assert "is intact: continue with --resume" in line
    # one process continues from it
    proc = nntile_lab("train", "--resume", work / "killed", "--steps", step + 1, "--ncpu", "1",
                      "--no-progress", cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    np.testing.assert_allclose(losses(work / "killed"), single(work, step + 1), rtol=0,
                               atol=TOL)


def test_a_link_slowed_100_times_still_finishes(cluster4, work):
    h2 = cluster4.hosts[1]
    run = Run(cluster4, work, "slow", steps=3)
    try:
        wait_for(lambda: checkpoint_step(run.out) >= 1 or run.proc.poll() is not None, 240,
                 "the run's first checkpoint")
        cluster4.sh("shape", h2, "--gbit", cluster4.gbit / 100)
        shaped = cluster4.in_host(h2, "tc", "qdisc", "show", "dev", "eth0").stdout
        assert "rate 10Mbit" in shaped, shaped
        code, err, _ = run.wait(timeout=600)
    finally:
        run.stop()
        cluster4.sh("shape", h2, "--gbit", cluster4.gbit)
    assert code == 0, err[-3000:]
    assert said(err) == [], said(err)
    np.testing.assert_allclose(losses(work / "slow"), single(work, 3), rtol=0, atol=TOL)
