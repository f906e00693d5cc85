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
    assert legend == sorted(set(tr.tasks["name"]), key=viz.legend_order)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (ms)" and ax.get_ylabel() == "worker"
    # the time axis spans the tasks: no margin before the first (it read −15 ms in 05)
    t = tr.tasks
    assert np.allclose(ax.get_xlim(), (t["start_us"].min() / 1e3, t["end_us"].max() / 1e3))


def test_gantt_zooms_on_a_step(tr):
    fig = viz.gantt(tr, step=1)
    lo, hi = tr.steps.loc[1, ["start_us", "end_us"]]
    assert np.allclose(fig.axes[0].get_xlim(), (lo / 1e3, hi / 1e3))
    t = tr.tasks
    inside = t[(t["end_us"] > lo) & (t["start_us"] < hi)]
    assert gantt_bars(fig) == Counter(inside["worker"].tolist())
    assert [x.get_text() for x in fig.legends[0].get_texts()] == sorted(
        set(inside["name"]), key=viz.legend_order)
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
        "parameters", "gradients", "optimizer state", "activations and temporaries"]
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
                          "nodes", "op_time", "throughput"}
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


# issue 19: one distinguishable colour per op, families share a hue
ISSUE_PAIRS = [("adamw", "softmax_tile"), ("cross_entropy_backward", "softmax_backward_tile"),
               ("axpby", "sum_fiber"), ("cross_entropy_loss", "sumsq_all")]


def _hue_light(rgb):
    import colorsys
    h, light, _ = colorsys.rgb_to_hls(*rgb)
    return h, light


def test_op_colours_are_one_per_op_with_a_hue_per_family(tr):
    names = set(tr.tasks["name"]) | {n for pair in ISSUE_PAIRS for n in pair}
    colors = viz.op_colors(names)
    assert len(set(colors.values())) == len(names)       # no two ops share a colour
    for a, b in ISSUE_PAIRS:                              # the pairs the issue saw shared
        assert np.abs(np.subtract(colors[a], colors[b])).max() > 0.15, (a, b)
    by_family = {}
    for n in names:
        by_family.setdefault(viz.op_family(n), []).append(n)
    for fam, ops in by_family.items():
        hues = {round(_hue_light(colors[n])[0], 3) for n in ops}
        assert len(hues) == 1, (fam, ops)                # members: one hue …
        lights = sorted(_hue_light(colors[n])[1] for n in ops)
        assert all(b - a > 0.04 for a, b in zip(lights, lights[1:])), (fam, lights)  # … shades
    assert viz.op_family("layer_norm_backward_tile") == "layer norm"
    assert viz.op_family("sumsq_all") == viz.op_family("sum_slice") == "reduction"
    # every figure of a trace agrees: the Gantt bars and the op-time bars of one op match
    gantt = {c.get_gid().split(":")[2]: tuple(c.get_facecolor()[0][:3])
             for c in viz.gantt(tr).axes[0].collections}
    ops = viz.op_time(tr).axes[0]
    for label, bar in zip([t.get_text() for t in ops.get_yticklabels()], ops.patches):
        assert np.allclose(bar.get_facecolor()[:3], gantt[label])


def test_gantt_names_the_task_under_the_cursor(tr):
    fig = viz.gantt(tr)
    ax = fig.axes[0]
    workers = sorted(set(tr.tasks["worker"]))
    rng = np.random.default_rng(0)
    for i in rng.choice(len(tr.tasks), 20, replace=False):
        t = tr.tasks.iloc[i]
        text = ax.format_coord((t["start_us"] + t["end_us"]) / 2e3, workers.index(t["worker"]))
        # the task itself, or one overlapping it in time on its worker (none: tasks on one
        # worker do not overlap)
        assert f": {t['name']} · {t['worker_name']} · " in text, (text, t["name"])
        assert f"{t['phase']}" in text and "ms" in text and "tiles" in text
        layer = "outside the blocks" if t["layer"] < 0 else f"layer {t['layer']}"
        assert layer in text
    gaps = tr.tasks.sort_values("start_us")
    first = gaps.iloc[0]
    before = first["start_us"] / 1e3 - 1.0
    assert "idle" in ax.format_coord(before, workers.index(first["worker"]))


def test_gantt_title_names_the_slice(tr):
    assert "whole trace" in viz.gantt(tr).axes[0].get_title()
    assert "step 1" in viz.gantt(tr, step=1).axes[0].get_title()
    title = viz.gantt(tr, title="step 1, CPU 0, backward").axes[0].get_title()
    assert "step 1, CPU 0, backward" in title and "whole trace" not in title


@pytest.mark.parametrize("name", sorted(viz.FIGURES))
def test_every_figure_displays_as_a_picture_at_its_size(tr, name):
    """A cell ending in viz.<name>(tr) shows a PNG (a bare Figure shows as text)."""
    import base64
    fig = viz.FIGURES[name](tr)
    data, meta = fig._repr_mimebundle_()
    png = base64.b64decode(data["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = fig.get_size_inches() * 100
    assert meta["image/png"] == {"width": round(width), "height": round(height)}
    # drawn at twice the size it is shown at: sharp on HiDPI screens, never stretched
    px_w, px_h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert abs(px_w - 2 * width) <= 2 and abs(px_h - 2 * height) <= 2


def test_layers_hold_what_notebook_05_says(tr):
    """05's "Where the time goes": embeddings in layer 0, the head and the loss in layer
    n_layer, the optimizer and the gradients' zeroing in layer −1 (it said layer −1 held
    the embeddings, head and loss)."""
    import nbformat

    from tests.jupyter_kernel import NOTEBOOKS
    from tests.trace.conftest import CONFIG
    t = tr.tasks
    layers = {name: set(g["layer"]) for name, g in t.groupby("name")}
    assert layers["embedding"] == {0} and layers["embedding_backward"] == {0}
    assert layers["cross_entropy_loss"] == {CONFIG.n_layer}
    assert layers["adamw"] == {-1}
    assert set(t[t["layer"] == -1]["phase"]) <= {"optimizer", "backward"}
    text = " ".join(" ".join(c.source for c in nbformat.read(
        NOTEBOOKS / "05_trace_explorer.ipynb", as_version=4).cells
        if c.cell_type == "markdown").split())
    for claim in ("layer 0 also holds the token and position embeddings",
                  "layer `n_layer` (one past the blocks) the final layer norm, the head and "
                  "the loss",
                  "Layer −1 holds what belongs to no layer: zeroing the gradients and the "
                  "optimizer"):
        assert claim in text, claim


def test_memory_by_category_says_what_rises_above_the_ram_cap():
    """Issue 33 (notebook 07): the category stack rose to ~700 MiB under a 306 MiB cap with
    no word of why. Out of core it sums RAM and the disk node: the figure says so, and draws
    the RAM cap and what RAM itself held over the stack."""
    import pandas as pd

    from nntile_lab.trace import Trace
    MiB = 1 << 20
    t = np.arange(0, 10_000, 1000.0)
    rng = np.random.default_rng(3)
    ram = rng.uniform(250, 306, len(t)) * MiB
    disk = np.linspace(200, 350, len(t)) * MiB
    tr = Trace.__new__(Trace)
    tr.memory = pd.DataFrame({
        "t_us": np.concatenate([t, t, t]),
        "node": [0] * len(t) + [1] * len(t) + [-1] * len(t),
        "name": ["NUMA 0"] * len(t) + ["Disk 0"] * len(t) + ["registered tiles"] * len(t),
        "used_bytes": np.concatenate([ram, disk, np.full(len(t), 245 * MiB)])})
    tr.nodes = pd.DataFrame([(0, "NUMA 0", "RAM", 306 * MiB, True),
                             (1, "Disk 0", "disk", 1200 * MiB, True)],
                            columns=["node", "name", "kind", "capacity_bytes", "capped"])
    tr.static_memory = {"parameters": 61 * MiB, "gradients": 61 * MiB,
                        "optimizer state": 122 * MiB}
    fig = viz.memory(tr)
    bx = fig.axes[1]
    assert "RAM and disk node together: above the RAM line it is on disk" in bx.get_title()
    labels = [t.get_text() for t in bx.get_legend().get_texts()]
    assert "RAM cap 306 MiB" in labels and "of which in RAM (NUMA 0)" in labels
    assert "activations and temporaries" in labels
    (ram_line,) = [ln for ln in bx.get_lines() if ln.get_label().startswith("of which")]
    assert np.allclose(ram_line.get_ydata(), ram / MiB)
    top = sum(float(c.get_paths()[0].vertices[:, 1].max()) for c in bx.collections[-1:])
    assert top > 306                                # the stack does rise above the cap
    # in memory (no cap, no disk node): no cap line, the plain title
    tr.memory = tr.memory[tr.memory["node"] != 1]
    tr.nodes = tr.nodes.iloc[:1].assign(capped=False)
    bx = viz.memory(tr).axes[1]
    assert bx.get_title() == "Memory by category (what every node holds)"
    assert not any("cap" in t.get_text() for t in bx.get_legend().get_texts())
