"""Task records of known task graphs, under every scheduler of the ``rt`` fixture."""
import os
import types

import numpy as np
import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab.trace import Trace, metrics
from nntile_lab.trace.recorder import TASK_COLUMNS


def tiled_gemm_trace(rt, layer=None, phase=None):
    """8×8 matrices in 4×4 tiles: 4 fills per operand, then a 2×2×2 grid of gemm tasks."""
    with Trace(rt) as tr, rt.scope(layer=layer, phase=phase, priority=3):
        a = nl.full((8, 8), 1.0, (4, 4))
        b = nl.full((8, 8), 2.0, (4, 4))
        c = nl.ops.gemm(a, b)
    return tr, c


def test_tiled_gemm_records_exactly_its_tasks(rt):
    tr, c = tiled_gemm_trace(rt, layer=2, phase="backward")
    assert np.array_equal(c.to_numpy(), np.full((8, 8), 16.0))
    t = tr.tasks
    assert list(t.columns) == TASK_COLUMNS
    assert t["name"].value_counts().to_dict() == {"fill": 8, "gemm": 8}
    gemm = t[t["name"] == "gemm"]
    assert (gemm["flops"] == 2 * 4 * 4 * 4).all()
    assert (gemm["bytes"] == 3 * 16 * 4).all()          # a, b and c tiles of 16 floats
    assert (t[t["name"] == "fill"]["bytes"] == 16 * 4).all()
    assert (t["layer"] == 2).all() and (t["phase"] == "backward").all()
    assert (t["priority"] == 3).all()
    assert set(t["worker"]) <= set(range(rt.nworkers))
    assert t["task_id"].is_unique
    assert (t["submit_us"] >= 0).all()
    assert (t["submit_us"] <= t["ready_us"]).all() and (t["ready_us"] <= t["start_us"]).all()
    assert (t["acquire_us"] <= t["start_us"]).all() and (t["start_us"] <= t["end_us"]).all()
    assert (t["end_us"] <= tr.duration_us).all()
    acc = tr.accesses
    assert len(acc) == 8 * 1 + 8 * 3
    # per c tile: the first k tile overwrites c (beta = 0: W), the second accumulates (RW)
    assert acc[acc["task_id"].isin(gemm["task_id"])]["mode"].tolist() == [1, 1, 2, 1, 1, 3] * 4


def test_dependencies_are_respected(rt):
    tr, _ = tiled_gemm_trace(rt)
    edges = metrics.task_graph(tr)
    # each gemm reads one a-tile and one b-tile written by fills (16 RAW edges) and the
    # second gemm of each c tile follows the first (4 more RAW edges)
    assert len(edges) == 20 and set(edges["kind"]) == {"RAW"}
    t = tr.tasks.set_index("task_id")
    assert (t.loc[edges["src"], "end_us"].to_numpy()
            <= t.loc[edges["dst"], "start_us"].to_numpy()).all()


def test_intervals_on_a_worker_never_overlap(rt):
    tr, _ = tiled_gemm_trace(rt)
    for _, mine in tr.tasks.sort_values("start_us").groupby("worker"):
        assert (mine["start_us"].to_numpy()[1:] >= mine["end_us"].to_numpy()[:-1]).all()


def test_critical_path_between_longest_task_and_makespan(rt):
    tr, _ = tiled_gemm_trace(rt)
    cp = metrics.critical_path(tr)
    assert cp["longest_task_us"] <= cp["length_us"] <= cp["makespan_us"]
    assert cp["makespan_us"] == pytest.approx(metrics.makespan_us(tr))
    # the longest chains are fill → gemm (k=0) → gemm (k=1) and fill (a k=1 tile) → gemm
    # (k=1); which weighs more depends on µs task durations, so either is right
    names = tr.tasks.set_index("task_id").loc[cp["tasks"], "name"].tolist()
    assert names in (["fill", "gemm", "gemm"], ["fill", "gemm"]), names


def test_only_tasks_submitted_while_recording(rt):
    x = nl.full((16,), 0.0, (4,))
    rt.wait()
    with Trace(rt) as tr:
        nl.ops.scale(x, 2.0)
    nl.ops.fill(x, 1.0)
    rt.wait()
    assert tr.tasks["name"].tolist() == ["scale"] * 4


def test_workers_and_memory_tables(rt):
    tr, _ = tiled_gemm_trace(rt)
    w = tr.workers
    assert len(w) == rt.nworkers
    assert (w["executing_us"] <= w["total_us"] + 1).all()
    assert (w["overhead_us"] >= 0).all()
    assert w["tasks"].sum() >= len(tr.tasks)
    m = tr.memory
    assert {0, -1} <= set(m["node"]) and "registered tiles" in set(m["name"])
    assert (m["used_bytes"] >= 0).all()
    # a, b, c: 3 × 8 × 8 floats registered at the end
    assert m[m["node"] == -1]["used_bytes"].iloc[-1] >= 3 * 64 * 4


def test_steps_assign_tasks(rt):
    x = nl.full((16,), 0.0, (4,))
    rt.wait()
    with Trace(rt) as tr:
        for _ in range(3):
            nl.ops.scale(x, 2.0)
            rt.wait()
            tr.mark_step(tokens=100)
    s = tr.steps
    assert s["step"].tolist() == [0, 1, 2] and s["tasks"].tolist() == [4, 4, 4]
    assert (s["tokens_per_s"] > 0).all()
    assert (s["start_us"].to_numpy()[1:] == s["end_us"].to_numpy()[:-1]).all()
    assert tr.tasks.groupby("step").size().tolist() == [4, 4, 4]


def test_memory_by_category_counts_each_tensor_once(rt):
    with Trace(rt) as tr:
        p = nl.full((10, 6), 1.0, (4, 6))
        model = types.SimpleNamespace(params={"w": p, "w_view": p.split_axis(1, 3)},
                                      grads={"w": nl.zeros((10, 6), (4, 4))})
        opt = types.SimpleNamespace(state={"m": {"w": nl.zeros((10, 6))},
                                           "v": {"w": nl.zeros((10, 6))}})
        scratch = nl.full((100, 100), 1.0)
        rt.wait()
        cats = tr.memory_by_category(model, opt)
    assert cats["parameters"] == cats["gradients"] == 240
    assert cats["optimizer state"] == 480
    assert cats["activations"] >= 40000     # scratch, written before the call
    assert tr.categories()["parameters"] == 240
    timeline = tr.category_timeline()
    assert list(timeline.columns) == ["t_us", "parameters", "gradients", "optimizer state",
                                      "activations"]
    scratch.free()


def test_lp_bound_is_a_number_or_says_why(rt):
    a = nl.full((8, 8), 1.0, (4, 4))
    for _ in range(12):             # calibrate the gemm history model for these tiles
        nl.ops.gemm(a, a).free()
    rt.wait()
    with Trace(rt, bound=True) as tr:
        nl.ops.gemm(a, a)
    b = tr.bound
    assert (b["bound_us"] is not None and b["bound_us"] > 0) or "calibrated" in b["note"]


def test_save_and_load_round_trip(rt, tmp_path):
    tr, _ = tiled_gemm_trace(rt)
    tr.save(str(tmp_path))
    back = Trace.load(str(tmp_path))
    pd.testing.assert_frame_equal(back.tasks, tr.tasks, check_dtype=False)
    assert len(metrics.task_graph(back)) == len(metrics.task_graph(tr))
    assert back.duration_us == tr.duration_us
    assert sorted(os.listdir(tmp_path)) == ["accesses.csv", "buses.csv", "memory.csv",
                                            "meta.json", "steps.csv", "tasks.csv",
                                            "workers.csv"]


def test_bad_use_is_explained(rt):
    with pytest.raises(ValueError, match="memory_period_ms=0"):
        Trace(rt, memory_period_ms=0)
    with pytest.raises(RuntimeError, match="mark_step"):
        Trace(rt).mark_step()
    with Trace(rt), pytest.raises(RuntimeError, match="another Trace is recording"):
        Trace(rt).start()



def test_a_step_marked_before_its_tasks_end_keeps_them(rt):
    """usage.md's step without rt.wait(): the optimizer's tasks still ran after
    mark_step(), and viz.gantt(tr, step=0) left them out (994 of 1047 tasks shown).
    mark_step waits for the step's tasks: every one is inside its step's window."""
    from nntile_lab.trace import viz
    a = nl.full((512, 512), 1.0, (128, 128))
    rt.wait()
    with Trace(rt) as tr:
        for _ in range(3):            # 3 × 64 GEMM tasks, queued: mark_step comes first
            a = nl.ops.gemm(a, a, alpha=1e-3)
        tr.mark_step(tokens=1)
    t, s = tr.tasks, tr.steps
    assert len(t) == 3 * 64 and (t["step"] == 0).all()
    assert t["end_us"].max() <= s["end_us"].iloc[0]
    fig = viz.gantt(tr, step=0)
    assert fig.axes[0].get_title().endswith(f"({len(t)} tasks)")
