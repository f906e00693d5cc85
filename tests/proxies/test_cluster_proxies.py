"""Collectives and proxy replays across network-namespace hosts (``--hostfile``), and the
pieces of the α-β check against measurement (``proxies.validate``)."""
import json

import numpy as np
import pandas as pd
import pytest

from nntile_lab.proxies import collectives as coll
from nntile_lab.proxies import extrapolate as ex
from nntile_lab.proxies import models, validate
from tests.netns_cluster import nntile_lab


def test_collectives_across_hosts_cross_the_links(cluster2, tmp_path):
    before = [cluster2.link_bytes(h) for h in cluster2.hosts]
    proc = nntile_lab("collectives", "--ranks", 2, "--hostfile", cluster2.hostfile, "--ops",
                      "p2p,allreduce", "--min-bytes", 1024, "--max-bytes", 2**20, "--json",
                      cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert {r["hosts"] for r in res["rows"]} == {2}          # one rank on each host
    after = [cluster2.link_bytes(h) for h in cluster2.hosts]
    # every p2p repeat sends its message over host 1's link and back over host 2's
    p2p = sum(r["bytes"] * r["repeats"] for r in res["rows"] if r["op"] == "p2p")
    for (tx0, rx0), (tx1, rx1) in zip(before, after):
        assert tx1 - tx0 >= p2p and rx1 - rx0 >= p2p
    assert set(res["model"]) == {"p2p", "allreduce"}


def test_a_proxy_replays_one_rank_per_host(cluster2, tmp_path):
    proc = nntile_lab("proxy", "gpt2", "--config", "small", "--data", 2, "--seq-len", 64,
                      "--bucket", "layer", "--scale", 64, "--iterations", 1, "--hostfile",
                      cluster2.hostfile, "--json", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert res["hosts"] == 2
    assert sorted(r["host"] for r in res["ranks"]) == sorted(cluster2.hosts)
    assert res["iteration_s"] > 0 and res["comm_s"] > 0


def test_a_bad_hostfile_is_named_before_mpirun(tmp_path):
    empty = tmp_path / "hosts"
    empty.write_text("# nothing\n")
    for args in (["collectives"], ["proxy", "gpt2", "--data", "2"]):
        proc = nntile_lab(*args, "--hostfile", empty, cwd=tmp_path, timeout=60)
        assert proc.returncode == 2 and f"--hostfile '{empty}' lists no host" in proc.stderr


# ---------------------------------------------------------------- the model, offline
def synthetic(alpha, beta, ranks, sizes, ops=("p2p", "allreduce")):
    return [{"op": op, "bytes": n, "ranks": ranks,
             "time_s": coll.cost(op, n, ranks, alpha, beta)} for op in ops for n in sizes]


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_a_fitted_link_carries_the_2_host_fit_to_n_hosts(nodes):
    """On an exact α-β world the fit on 2 hosts predicts any host count as a Link with the
    same figures does; ``scale`` divides every message as the replay does."""
    alpha, beta = 40e-6, 1 / 60e6
    link = validate.fitted_link("t", synthetic(alpha, beta, 2, coll.default_sizes(1024, 2**24)))
    nominal = ex.Link("n", alpha, 1 / beta)
    kw = dict(model="gpt2", config_name="small", data=nodes, bucket="layer", tflops=1.0)
    proxy = models.build(**kw)
    for scale in (1, 16):
        got = ex.simulate(proxy, link, scale=scale)["iteration_s"]
        assert got == pytest.approx(ex.simulate(proxy, nominal, scale)["iteration_s"], rel=1e-6)
    big, small = (ex.simulate(proxy, link, s)["comm_s"] for s in (1, 16))
    assert big > 10 * small
    # each operation's own fit, where asked: allreduce's here, as slow as 2x the link
    rows = synthetic(alpha, beta, 2, coll.default_sizes(1024, 2**24), ops=("p2p",))
    rows += synthetic(alpha, 2 * beta, 2, coll.default_sizes(1024, 2**24), ops=("allreduce",))
    per_op = validate.fitted_link("t", rows, per_op=True)
    assert per_op.time("allreduce", 1e6, nodes) == pytest.approx(
        coll.cost("allreduce", 1e6, nodes, alpha, 2 * beta), rel=1e-6)
    with pytest.raises(ValueError, match="no fit for 'alltoall'"):
        per_op.time("alltoall", 1e6, 4)
    # a bridge that moves 2 links' worth: an allreduce on N hosts puts 2(N-1)/N·n on each
    capped = validate.fitted_link("t", rows, capacity_bytes_s=2 / beta)
    n = 8e6
    assert capped.time("allreduce", n, nodes) == pytest.approx(
        max(coll.cost("allreduce", n, nodes, alpha, beta),
            nodes * 2 * (nodes - 1) / nodes * n * beta / 2), rel=1e-6)


def test_the_step_model_takes_the_busiest_link(tmp_path):
    comm = pd.DataFrame(
        [(s, "train", a, b, f"h{a}", f"h{b}", n) for s in (1, 2)
         for a, b, n in ((0, 1, 8e6), (1, 0, 2e6), (0, 2, 8e6), (2, 0, 1e6), (1, 2, 3e6))]
        + [(1, "eval+checkpoint", 0, 1, "h0", "h1", 9e9),
           (1, "train", 1, 0, "h1", "h0", 7e6)],   # the first step's start-up transfers
        columns=list(("step", "phase", "src_rank", "dst_rank", "src_host", "dst_host",
                      "bytes")))
    loads = validate.link_loads(comm)
    assert loads == {"h0": (16e6, 3e6), "h1": (5e6, 8e6), "h2": (1e6, 11e6)}
    assert validate.link_loads(comm, by="rank") == {0: (16e6, 3e6), 1: (5e6, 8e6),
                                                    2: (1e6, 11e6)}
    alpha, beta = 1e-3, 1 / 50e6
    link_rows = synthetic(alpha, beta, 2, coll.default_sizes(1024, 2**24))
    link = validate.fitted_link("t", link_rows)
    pred = validate.predict_step(loads, link, compute_s=0.4, ranks=4, cores=2)
    # h0 sends 16 MB and receives 3 MB, one after the other
    assert pred["busiest_host"] == "h0" and pred["busiest_bytes"] == 19e6
    assert pred["comm_s"] == pytest.approx(alpha + 19e6 * beta, rel=1e-6)
    assert pred["step_s"] == pytest.approx(pred["comm_s"] + 0.2, rel=1e-9)
    # all hosts' 22 MB over a bridge of 10 MB/s take longer than h0's link
    slow = validate.fitted_link("t", link_rows, capacity_bytes_s=10e6)
    assert validate.predict_step(loads, slow, 0.4, 4, 2)["comm_s"] == pytest.approx(2.2)
    log = tmp_path / "log.csv"
    log.write_text("step,time_s\n1,5.0\n2,6.0\n3,7.5\n4,8.5\n5,9.6\n")
    assert validate.step_time(log) == pytest.approx(np.median([1.0, 1.5, 1.0, 1.1]))
    assert validate.step_time(log, skip=2) == pytest.approx(1.1)
