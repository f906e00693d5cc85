"""Metrics on hand-made traces, where every answer is known."""
import types

import numpy as np
import pandas as pd
import pytest

from nntile_lab.trace import metrics

R, W, RW, RWC = 1, 2, 3, 3 | 16


def fake_trace(tasks, accesses=()):
    """tasks: (task_id, name, worker, start_us, end_us, flops); accesses: (task, handle, mode)."""
    t = pd.DataFrame(tasks, columns=["task_id", "name", "worker", "start_us", "end_us", "flops"])
    t["duration_us"] = t["end_us"] - t["start_us"]
    acc = pd.DataFrame(list(accesses), columns=["task_id", "handle", "mode"])
    empty = pd.DataFrame()
    return types.SimpleNamespace(tasks=t, accesses=acc, workers=empty, buses=empty, steps=empty,
                                 memory=empty, duration_us=100.0,
                                 bound={"bound_us": None, "note": "n/a"},
                                 categories=lambda: {})


def edges_of(accesses):
    tasks = [(i, "op", 0, i, i + 1, 0) for i in sorted({a[0] for a in accesses})]
    e = metrics.task_graph(fake_trace(tasks, accesses))
    return sorted(zip(e["src"], e["dst"], e["kind"]))


def test_read_after_write_write_after_read_write_after_write():
    # 0 writes h; 1 and 2 read it; 3 overwrites it; 4 overwrites again
    assert edges_of([(0, 7, W), (1, 7, R), (2, 7, R), (3, 7, W), (4, 7, W)]) == [
        (0, 1, "RAW"), (0, 2, "RAW"), (1, 3, "WAR"), (2, 3, "WAR"), (3, 4, "WAW")]


def test_read_write_chain_and_independent_handles():
    assert edges_of([(0, 1, RW), (1, 2, RW), (2, 1, RW), (3, 2, R)]) == [
        (0, 2, "RAW"), (1, 3, "RAW")]


def test_commuting_accumulations_do_not_depend_on_each_other():
    # 0 writes; 1, 2, 3 accumulate in any order; 4 reads the sum
    assert edges_of([(0, 5, W), (1, 5, RWC), (2, 5, RWC), (3, 5, RWC), (4, 5, R)]) == [
        (0, 1, "RAW"), (0, 2, "RAW"), (0, 3, "RAW"),
        (1, 4, "RAW"), (2, 4, "RAW"), (3, 4, "RAW")]


def test_critical_path_follows_the_longest_chain():
    # chain 0 → 1 → 3 takes 10 + 5 + 10; the other branch 0 → 2 → 3 only 10 + 1 + 10
    tasks = [(0, "a", 0, 0, 10, 0), (1, "b", 0, 10, 15, 0), (2, "c", 1, 10, 11, 0),
             (3, "d", 0, 15, 25, 0)]
    acc = [(0, 1, W), (1, 1, R), (1, 2, W), (2, 1, R), (2, 3, W), (3, 2, R), (3, 3, R)]
    cp = metrics.critical_path(fake_trace(tasks, acc))
    assert cp["tasks"] == [0, 1, 3]
    assert cp["length_us"] == 25 and cp["makespan_us"] == 25 and cp["ratio"] == 1
    assert cp["longest_task_us"] == 10


def test_utilisation_idle_gaps_and_busy_time():
    tasks = [(0, "a", 0, 0, 10, 1e4), (1, "a", 0, 30, 40, 1e4), (2, "b", 1, 0, 40, 0)]
    tr = fake_trace(tasks)
    u = metrics.utilisation(tr).set_index("worker")
    assert u.loc[0, "utilisation"] == pytest.approx(0.5) and u.loc[1, "utilisation"] == 1
    gaps = metrics.idle_gaps(tr)
    assert gaps[["worker", "start_us", "end_us"]].values.tolist() == [[0, 10, 30]]
    edges, busy = metrics.busy_over_time(tr, bins=4)
    assert np.allclose(edges, [0, 10, 20, 30, 40]) and np.allclose(busy, [2, 1, 1, 2])
    assert metrics.gflops(tr) == pytest.approx(2e4 / 40e-6 / 1e9)


def test_op_times_and_summary():
    tasks = [(0, "a", 0, 0, 10, 1e4), (1, "a", 0, 30, 40, 1e4), (2, "b", 1, 0, 40, 0)]
    ops = metrics.op_times(fake_trace(tasks)).set_index("name")
    assert ops.loc["a", "tasks"] == 2 and ops.loc["a", "total_us"] == 20
    assert ops.loc["a", "gflops"] == pytest.approx(2e4 / 20e-6 / 1e9)
    s = metrics.summary(fake_trace(tasks), tokens=80, peak_gflops=10.0)
    assert s["tokens_per_s"] == pytest.approx(80 / 40e-6)
    assert s["mfu"] == pytest.approx(s["gflops"] / 10)
    assert s["lp_bound_s"] is None and s["lp_bound_note"] == "n/a"


@pytest.mark.parametrize("peak", [-5, 0, float("nan"), float("inf"), "fast", True])
def test_a_peak_that_is_no_rate_is_refused_not_a_negative_mfu(tmp_path, peak):
    """peak_gflops=-5 gave a negative MFU: every entry point refuses it, naming it."""
    from nntile_lab import sweep
    from nntile_lab.spec import ExperimentSpec
    tasks = [(0, "a", 0, 0, 10, 1e4)]
    with pytest.raises(ValueError, match=r"peak_gflops=.* must be the machine's GFLOP/s, a "
                                         r"number > 0"):
        metrics.summary(fake_trace(tasks), tokens=80, peak_gflops=peak)
    with pytest.raises(ValueError, match=r"peak_gflops=.* must be"):
        sweep.run([ExperimentSpec()], tmp_path, peak_gflops=peak, progress=False)
    assert not any(tmp_path.iterdir())   # refused before any point
