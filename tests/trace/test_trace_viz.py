"""The figures and the Chrome export show what they claim, on a traced GPT-2 run."""
import json
from collections import Counter

import numpy as np
import pytest

from nntile_lab.trace import metrics, to_chrome, viz, write_chrome


@pytest.fixture(scope="module")
def tr(gpt2_trace):
    return gpt2_trace[0]


def gantt_bars(fig):
    """{worker: number of bars} from the Gantt collections, checking each bar's row."""
    ax = fig.axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    count = Counter()
    for coll in ax.collections:
        _, w, _ = coll.get_gid().split(":")
        for path in coll.get_paths():
            ys = path.vertices[:, 1]
            assert round((ys.min() + ys.max()) / 2) == rows.index(f"CPU {w}")
            count[int(w)] += 1
    return count


def test_stand_in_run_is_traced(tr, gpt2_trace):
    _, memory, tokens = gpt2_trace
    t = tr.tasks
    assert {"gemm", "adamw", "embedding", "cross_entropy_loss"} <= set(t["name"])
    assert set(t["phase"]) == {"forward", "backward", "optimizer"}   # every task tagged
    assert tr.steps["tokens"].tolist() == [tokens, tokens]
    assert memory["parameters"] > 0 and memory["optimizer state"] == 2 * memory["parameters"]
    cp = metrics.critical_path(tr)
    assert cp["longest_task_us"] <= cp["length_us"] <= cp["makespan_us"]


def test_gantt_has_one_bar_per_task_in_its_worker_row(tr):
    fig = viz.gantt(tr)
    assert gantt_bars(fig) == Counter(tr.tasks["worker"].tolist())
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == sorted(set(tr.tasks["name"]))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (ms)" and ax.get_ylabel() == "worker"


def test_gantt_zooms_on_a_step(tr):
    fig = viz.gantt(tr, step=1)
    lo, hi = tr.steps.loc[1, ["start_us", "end_us"]]
    assert np.allclose(fig.axes[0].get_xlim(), (lo / 1e3, hi / 1e3))
    t = tr.tasks
    inside = t[(t["end_us"] > lo) & (t["start_us"] < hi)]
    assert gantt_bars(fig) == Counter(inside["worker"].tolist())
    assert [x.get_text() for x in fig.legends[0].get_texts()] == sorted(set(inside["name"]))
    with pytest.raises(ValueError, match="step=7 was not marked"):
        viz.gantt(tr, step=7)


def test_utilisation_figure(tr):
    ax, bx = viz.utilisation(tr).axes
    assert ax.get_ylabel() == "workers busy (%)" and ax.get_xlabel() == "time (ms)"
    heights = ax.patches[0].get_data().values
    assert heights.max() <= 100 + 1e-9 and heights.max() > 0
    assert len(bx.patches) == 3 * len(tr.workers)    # executing, overhead, sleeping
    assert [t.get_text() for t in bx.get_legend().get_texts()] == ["executing", "overhead",
                                                                   "sleeping"]


def test_memory_figure_per_node_and_category(tr):
    ax, bx = viz.memory(tr).axes
    assert {line.get_label() for line in ax.get_lines()} == set(tr.memory["name"])
    assert [t.get_text() for t in bx.get_legend().get_texts()] == [
        "parameters", "gradients", "optimizer state", "activations"]
    assert ax.get_ylabel() == bx.get_ylabel() == "used (MiB)"


def test_transfers_op_time_and_throughput_figures(tr):
    ax, bx = viz.transfers(tr).axes
    if not tr.buses["bytes"].sum():
        assert "no data moved" in ax.texts[0].get_text()
    assert len(bx.patches) == tr.tasks["name"].nunique()
    (ax,) = viz.op_time(tr).axes
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == sorted(set(tr.tasks["name"]))
    assert len(ax.patches) == tr.tasks["name"].nunique()
    ax = viz.throughput(tr).axes[0]
    assert len(ax.patches) == len(tr.steps) == 2
    assert ax.get_ylabel() == "GFLOP/s"


def test_save_all_writes_pngs(tr, tmp_path):
    paths = viz.save_all(tr, str(tmp_path), dpi=40)
    assert set(paths) == {"gantt", "gantt_step", "utilisation", "memory", "transfers",
                          "op_time", "throughput"}
    for p in paths.values():
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_chrome_trace_has_one_event_per_task(tr, tmp_path):
    path = write_chrome(tr, str(tmp_path / "trace.json"))
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"]
    x = [e for e in events if e["ph"] == "X"]
    assert len(x) == len(tr.tasks)
    assert {e["tid"] for e in x} == set(tr.tasks["worker"])
    assert sorted(e["args"]["task_id"] for e in x) == sorted(tr.tasks["task_id"])
    assert all({"layer", "phase", "flops", "step"} <= set(e["args"]) for e in x)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in x)
    named = {e["tid"] for e in events if e.get("name") == "thread_name"}
    assert named == set(tr.tasks["worker"])
    assert to_chrome(tr) == data
