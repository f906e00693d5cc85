"""Process kills at random moments of sweeps and figure runs: after ``kill -9`` of the
parent no point process is left running (each dies with its parent: nntile_lab.orphans),
and what is on disk is whole (cache and figure records written atomically). Every child
has a time limit."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from nntile_lab.engine import read_record
from nntile_lab.figures.records import check_record
from tests.faults._proc import ROOT

TINY = ["--n-layer", "1", "--n-embd", "64", "--n-head", "1", "--vocab-size", "64",
        "--seq-len", "16", "--batch", "2", "--warmup-steps", "0", "--ncpu", "1"]


def tagged(tag):
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("NL_KILL_TEST") == tag:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def kill_at_random(argv, moment_range, tmp_path, seed: int):
    """Start ``nntile-lab argv``; once a point's child runs, SIGKILL the parent at a moment
    drawn from ``seed`` (each parametrised run its own, the same on every run); return the
    seconds it ran and the processes of the run still alive 5 s later."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, NL_KILL_TEST=tag, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, "-m", "nntile_lab.cli", *argv], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        end = time.monotonic() + 90
        while not [p for p in tagged(tag) if p.pid != parent.pid]:
            assert parent.poll() is None, "the run ended before a point started"
            assert time.monotonic() < end, "no point process within 90 s"
            time.sleep(0.05)
        moment = random.Random(seed).uniform(*moment_range)
        time.sleep(moment)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while (left := tagged(tag)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return moment, left
    finally:
        for p in tagged(tag):   # never leave anything behind, whatever the outcome
            p.kill()
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)


@pytest.mark.parametrize("run", range(2))
def test_killing_a_sweep_leaves_no_orphan_and_only_whole_records(tmp_path, run):
    cache = tmp_path / "cache"
    moment, left = kill_at_random(["sweep", *TINY, "--measure-steps", "300,301,302",
                                   "--cache", str(cache), "--no-progress"], (0.0, 3.0),
                                  tmp_path, seed=run)
    assert not left, f"killed {moment:.2f} s into a point: {len(left)} processes left"
    for path in cache.glob("*.json"):
        read_record(path)   # whole and valid, or RecordError


@pytest.mark.parametrize("run", range(2))
def test_killing_a_figures_run_leaves_no_orphan_and_only_whole_records(tmp_path, run):
    out = tmp_path / "fig"
    # points of tens of seconds: a child left running would outlive the 5 s check
    moment, left = kill_at_random(["figures", "--smoke", "--layers", "2", "--embds", "512",
                                   "--batch", "4", "--seq-len", "128", "--no-bf16", "--ncpu",
                                   "1", "--out", str(out)], (0.0, 4.0), tmp_path,
                                  seed=10 + run)
    assert not left, f"killed {moment:.2f} s into a point: {len(left)} processes left"
    for path in (out / "records").glob("*.json"):
        check_record(read_record(path), path)
