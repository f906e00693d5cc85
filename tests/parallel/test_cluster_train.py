"""Training across hosts that are network namespaces (``scripts/cluster.sh``): separate TCP
stacks joined by shaped links, Open MPI started through the cluster's launch agent, TCP over
the hosts' eth0 the only transport. The losses equal one process's, the bytes each host pair
exchanged are in the run's ``comm.csv`` (and really crossed the links), and a checkpoint
written on 4 hosts resumes on 2 hosts and on one process."""
import csv
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.netns_cluster import nntile_lab
from tests.torch_adapter import tiny_dataset

TOL = 1e-5
# a 1-layer GPT-2 on a learnable stream; batch 4 in batch tiles of 1, so the data layout
# gives each of 4 ranks one sequence
OPTS = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--vocab-size", "64",
        "--seq-len", "16", "--batch", "4", "--batch-tile", "1", "--embd-tile", "16",
        "--vocab-tile", "32", "--eval-every", "0", "--no-progress", "--scheduler", "eager",
        "--lr", "1e-2", "--min-lr", "1e-2", "--warmup", "1"]
# a constant learning rate after warm-up (min-lr = lr): runs of 3 and of 5 steps share it
STEPS = 3


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster_train")
    tiny_dataset(d / "data")
    return d


def losses(run: Path) -> list[float]:
    with open(run / "log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r.get("loss")]


def train(work, out, *args, timeout=400):
    proc = nntile_lab("train", "--data", work / "data", *OPTS, "--out", out, *args, cwd=work,
                      timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


@pytest.fixture(scope="module")
def one(work):
    """The single process's losses over STEPS steps (one StarPU worker, as each rank has)."""
    train(work, "one", "--steps", STEPS, "--ncpu", "1")
    return losses(work / "one")


def test_operator_layout_on_two_hosts_equals_one_process(cluster4, work, one):
    hosts = cluster4.hosts[:2]
    hostfile = cluster4.hostfile_with(hosts)
    before = {h: cluster4.link_bytes(h) for h in hosts}
    proc = train(work, "op2", "--steps", STEPS, "--hostfile", hostfile, "--layout", "operator")
    after = {h: cluster4.link_bytes(h) for h in hosts}
    np.testing.assert_allclose(losses(work / "op2"), one, rtol=0, atol=TOL)
    # every rank ran on its own host, each host's ranks on its host's address
    comm = pd.read_csv(work / "op2" / "comm.csv")
    assert sorted(set(comm["src_host"])) == sorted(hosts)
    steps = comm[comm["phase"] == "train"].groupby(["src_host", "dst_host", "step"])["bytes"].sum()
    assert len(steps) == 2 * STEPS and (steps > 0).all(), steps     # both ways, every step
    # the payloads StarPU-MPI counted crossed the links: each host sent at least as much
    # over its eth0 (headers and Open MPI's own messages on top)
    for h in hosts:
        payload = comm.loc[comm["src_host"] == h, "bytes"].sum()
        sent = after[h][0] - before[h][0]
        assert payload <= sent, (h, payload, sent)
    assert "network, MiB per training step between hosts:" in proc.stdout


def test_data_layout_on_four_hosts_resumes_on_two_and_on_one(cluster4, work, one):
    """4 hosts, each its part of the batch; the checkpoint of step 2 continues to step 3 on
    2 hosts (operator layout) and on one process, every loss the single process's."""
    train(work, "dp4", "--steps", 2, "--hostfile", cluster4.hostfile, "--layout", "data")
    np.testing.assert_allclose(losses(work / "dp4"), one[:2], rtol=0, atol=TOL)
    comm = pd.read_csv(work / "dp4" / "comm.csv")
    assert sorted(set(comm["src_host"])) == sorted(cluster4.hosts)
    for where, extra in (("on2", ["--hostfile", cluster4.hostfile_with(cluster4.hosts[2:])]),
                         ("on1", ["--ncpu", "1"])):
        shutil.copytree(work / "dp4", work / where, ignore=shutil.ignore_patterns(".rank*"))
        proc = nntile_lab("train", "--resume", work / where, "--steps", STEPS, *extra,
                          "--no-progress", cwd=work, timeout=400)
        assert proc.returncode == 0, proc.stderr[-4000:]
        np.testing.assert_allclose(losses(work / where), one, rtol=0, atol=TOL, err_msg=where)
