"""The widgets driven without a browser: their callbacks are plain methods."""
import re

import numpy as np
import pytest

from nntile_lab.jupyter_figure import ipympl_classes
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import viz
from nntile_lab.widgets import SchedulerSweep, TileSweep, TraceExplorer, applicable_schedulers
from tests.trace.conftest import traced_gpt2

Canvas = ipympl_classes()[0]   # imported without switching this process's backend

BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=3, ncpu=2)


def test_tile_sweep_button_plots_live_and_shows_a_point(tmp_path):
    ts = TileSweep(BASE, {"vocab_tile": "32,64,0"}, cache_dir=tmp_path, peak_gflops=100.0)
    assert ts.run_button.description == "Run sweep"
    assert "nl-sweep-run" in ts.run_button._dom_classes
    assert "nl-sweep-plot" in ts.plot.box._dom_classes
    drawn = []
    ts.plot.box.observe(lambda c: drawn.append(ts.plot.figure), names="outputs")
    ts.run_button.click()                           # what the browser's click does
    assert ts.running and ts.wait(600)              # the sweep runs in its own thread
    assert ts.background.error is None
    df = ts.df
    figures = [f for f in drawn if f is not None]
    assert len(df) == 3 and len(figures) == 3 + 1  # redrawn after each point, then done
    assert drawn[0] is None                         # the previous sweep's plot went first
    for f in figures:                               # a live canvas, the figure's own
        assert isinstance(f.canvas, Canvas) and "nl-sweep-plot-canvas" in f.canvas._dom_classes
    assert ts.plot.shown is ts.plot.figure.canvas
    (shown,) = ts.plot.box.outputs                  # the one output: the canvas's view
    view = shown["data"]["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == ts.plot.figure.canvas.model_id
    assert ts.status.value.startswith("done: 3 points, best vocab_tile=")
    assert "vocab_tile=0: vocab_tile=0 must be from 1" in ts.message.value
    assert "--" not in ts.message.value             # the widget's words, not the CLI's
    assert [v for _, v in ts.point.options] == [0, 1]
    ts.point.value = 1                               # picking a point shows its trace
    html, gantt, memory = ts.detail.children
    assert gantt is ts.gantt.box and memory is ts.memory.box
    assert "vocab_tile=64, step" in ts.gantt.figure.axes[0].get_title()
    assert ts.memory.figure.axes[0].get_ylabel() == "used (MiB)"
    assert "vocab_tile=64" in html.value
    again = ts.run()                                 # from the cache
    assert again["cached"].tolist() == [True, True, False]
    (tmp_path / f"{again.loc[0, 'key']}.json").write_text("{torn")
    assert ts.run()["cached"].tolist() == [False, True, False]
    assert "is corrupt" in ts.message.value and "runs again" in ts.message.value


@pytest.mark.parametrize("model, tiles, message", [
    ({}, {"vocab_tile": "abc"}, "vocab_tile &#x27;abc&#x27;: not a valid int"),
    ({"n_head": "3"}, {"vocab_tile": "32"}, "n_embd=16 is not divisible by n_head=3"),
    ({}, {}, "no tile sizes to vary"),
    ({"batch": "0"}, {"vocab_tile": "32"}, "batch=0 must be ≥ 1"),
    ({}, {"inner_tile": "1:4:0"}, "inner_tile &#x27;1:4:0&#x27;: a range is LOW:HIGH:STEP"),
])
def test_tile_sweep_bad_input_is_a_message(tmp_path, model, tiles, message):
    ts = TileSweep(BASE, tiles, cache_dir=tmp_path, peak_gflops=100.0)
    for name, value in model.items():
        ts.model[name].value = value
    assert ts.run() is None
    assert "Error:" in ts.message.value and message in ts.message.value
    assert "--" not in ts.message.value           # fields are named as the widget labels them
    assert ts.status.value == "not run: the values have an error (below)"
    assert not ts.run_button.disabled and ts.stop_button.disabled


def test_scheduler_sweep_bars_over_repeats(tmp_path):
    assert "lws" in applicable_schedulers() and "graph_test" not in applicable_schedulers()
    ss = SchedulerSweep(BASE, ["eager", "lws"], repeats=2, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    assert "nl-sched-run" in ss.run_button._dom_classes
    df = ss.run()
    assert len(df) == 4 and df["error"].isna().all() and sorted(set(df["seed"])) == [0, 1]
    assert ss.status.value.startswith("done: 4 points, best ")
    assert isinstance(ss.plot.figure.canvas, Canvas)
    from nntile_lab.plots.sweep import aggregate_repeats
    agg = aggregate_repeats(df)
    assert agg["scheduler"].tolist() == ["eager", "lws"] and (agg["repeats"] == 2).all()
    for _, r in agg.iterrows():
        mine = df[df["scheduler"] == r["scheduler"]]["gflops"]
        assert (r["gflops_min"], r["gflops_max"]) == (mine.min(), mine.max())
    ss.schedulers.value = ()
    assert ss.run() is None and "no scheduler selected" in ss.message.value


def test_trace_explorer(tmp_path):
    tr = traced_gpt2()[0]
    tx = TraceExplorer(tr)
    assert isinstance(tx.plot.figure.canvas, Canvas)
    assert f"{len(tr.tasks)} tasks (whole trace)" in tx.table.value
    tx.phase.value = "backward"
    tx.step.value = 1
    sel = tx.select(1, None, None, "backward")
    assert len(sel) > 0 and set(sel["phase"]) == {"backward"} and set(sel["step"]) == {1}
    assert f"{len(sel)} tasks" in tx.table.value
    worker = int(tr.tasks["worker"].iloc[0])
    assert set(tx.select(worker=worker)["worker"]) == {worker}
    with pytest.raises(ValueError, match="layer=99 is not in this trace"):
        tx.select(layer=99)
    tr.save(str(tmp_path / "tr"))
    assert len(TraceExplorer(tmp_path / "tr").select()) == len(tr.tasks)
    with pytest.raises(FileNotFoundError, match="holds no trace"):
        TraceExplorer(tmp_path)


def test_interrupting_the_widget_keeps_finished_points(tmp_path, monkeypatch):
    ts = TileSweep(BASE, {"batch_tile": "1,2"}, cache_dir=tmp_path, isolate=False,
                   peak_gflops=100.0)

    def interrupt(df):
        raise KeyboardInterrupt       # "interrupt kernel" right after the first point
    monkeypatch.setattr(ts, "_draw", interrupt)
    with pytest.raises(KeyboardInterrupt) as info:
        ts.run()
    # the sweep's own interrupt: one line in a notebook, naming what was kept
    assert info.value._render_traceback_() == [
        "Interrupted: sweep stopped after 1 of 2 points; the finished ones are cached: run "
        "it again to resume"]
    assert ts.status.value.startswith("interrupted after 1 of 2 points")
    assert not ts.run_button.disabled
    monkeypatch.undo()
    assert ts.run()["cached"].tolist() == [True, False]
    # interrupted before any point: the plot says so (not "running" for ever)
    def interrupted_at_once(pts):
        raise KeyboardInterrupt
    monkeypatch.setattr(ts, "_measure", interrupted_at_once)
    with pytest.raises(KeyboardInterrupt):
        ts.run()
    assert ts.plot.figure is None and ts.plot.text == "no plot: interrupted before the first point"


def test_bad_points_are_messages_and_the_rest_runs(tmp_path):
    """Issue 9 item 7 in the widget: a tile larger than its dimension or zero, a cache file
    of an unknown version, a model that does not fit, an unknown scheduler."""
    ts = TileSweep(BASE, {"vocab_tile": "32,65,0"}, cache_dir=tmp_path, isolate=False,
                   peak_gflops=100.0)
    df = ts.run()
    assert df["error"].isna().tolist() == [True, False, False] and df.loc[0, "gflops"] > 0
    assert ts.status.value.startswith("done: 3 points, best vocab_tile=32: ")
    assert "vocab_tile=65: vocab_tile=65 must be from 1 to vocab_size=64" \
        in ts.message.value
    assert "vocab_tile=0: vocab_tile=0 must be from 1" in ts.message.value
    path = tmp_path / f"{df.loc[0, 'key']}.json"
    path.write_text(path.read_text().replace('"schema": 2', '"schema": 3'))
    again = ts.run()                       # an unknown record is measured again, with a notice
    assert again["cached"].tolist() == [False, False, False] and again.loc[0, "gflops"] > 0
    assert "has schema 3" in ts.message.value and "newer version" in ts.message.value
    # a model that cannot run under its memory cap: rows with the planner's reason
    capped = TileSweep(BASE.replace(memory_limit_mb=16), {"vocab_tile": "32,64"},
                       cache_dir=tmp_path, isolate=False, peak_gflops=100.0)
    capped.model["n_embd"].value = "512"   # caps under 16 MiB are refused by the spec itself
    df = capped.run()
    assert len(df) == 2 and df["gflops"].isna().all()
    assert capped.status.value == "done: 2 points, none ran"
    assert "Error:" not in capped.message.value     # a notice per point: the sweep ran
    assert len(re.findall(r"cannot run under these memory settings: the step needs \d+ MiB "
                          r"but the cap is 16 MiB", capped.message.value)) == 2
    # an unknown scheduler: said at once; the tile sweep runs on a known one
    odd = TileSweep(BASE.replace(scheduler="nosuch"), {"vocab_tile": "32"},
                    cache_dir=tmp_path, isolate=False, peak_gflops=100.0)
    assert "unknown scheduler &#x27;nosuch&#x27;; valid ones: " in odd.message.value
    assert odd.scheduler.value == "lws" and odd.run().loc[0, "gflops"] > 0


def test_scheduler_sweep_names_an_unknown_scheduler_and_runs_the_rest(tmp_path):
    ss = SchedulerSweep(BASE, ["nosuch", "eager"], repeats=1, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    note = "unknown scheduler &#x27;nosuch&#x27; left out; valid ones: "
    assert note in ss.message.value and ss.schedulers.value == ("eager",)
    df = ss.run()
    assert df["scheduler"].tolist() == ["eager"] and df.loc[0, "gflops"] > 0
    assert note in ss.message.value and ss.status.value.startswith("done: 1 points, best eager")


def test_scheduler_sweep_with_and_without_priorities(tmp_path):
    """The priorities toggle doubles the points (off/on), heteroprio's too (its buckets
    take the priority as a level)."""
    ss = SchedulerSweep(BASE, ["lws", "heteroprio"], repeats=1, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    ss.priorities.value = True
    df = ss.run()
    got = {(r.scheduler, r.priorities): r.error for r in df.itertuples()}
    assert got == {("lws", False): None, ("lws", True): None, ("heteroprio", False): None,
                   ("heteroprio", True): None}
    assert (df["gflops"] > 0).all()
    assert ss.status.value.startswith("done: 4 points, best ")
    assert ss.plot.figure is not None
    assert ss.placement.figure is None      # CPU workers only: nothing to place
    assert "prio, lws, dmdas, dmdasd and heteroprio honour them" in ss.message.value
    from nntile_lab.plots.sweep import aggregate_repeats
    agg = aggregate_repeats(df)
    ran = {(r.scheduler, r.priorities): r.repeats for r in agg.itertuples()}
    assert ran == {("lws", False): 1, ("lws", True): 1, ("heteroprio", False): 1,
                   ("heteroprio", True): 1}


def test_scheduler_sweep_on_unlike_workers_shows_where_tasks_ran(tmp_path):
    from nntile_lab.bench.schedulers import UNLIKE_SCHEDULERS
    from nntile_lab.runtime import opencl_devices
    if opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    mixed = BASE.replace(ncpu=1, nopencl=1)
    assert SchedulerSweep(mixed).schedulers.value == UNLIKE_SCHEDULERS
    ss = SchedulerSweep(BASE.replace(ncpu=1), ["dmda", "heteroprio"], repeats=1,
                        cache_dir=tmp_path, isolate=False, peak_gflops=100.0)
    assert ss.nopencl.value == "0" and ss.max_opencl >= 1
    ss.nopencl.value = "1"
    df = ss.run()
    assert df["error"].isna().all(), df["error"].tolist()
    assert set(df["nopencl"]) == {1}
    fig = ss.placement.figure
    assert fig is not None and "1 OpenCL worker" in fig._suptitle.get_text()
    bars = [p.get_height() for p in fig.axes[0].patches]
    assert len(bars) == 2 and all(0 <= h <= 100 for h in bars)


def test_widget_words_name_fields_not_flags():
    from nntile_lab.widgets.common import widget_words
    assert widget_words("vocab_tile=0 (--vocab-tile) must be from 1") == \
        "vocab_tile=0 must be from 1"
    assert widget_words("--inner-tile 'abc': not a valid int") == \
        "inner_tile 'abc': not a valid int"
    assert widget_words("run it with priorities=False (--no-priorities)") == \
        "run it with priorities=False"
    assert widget_words("see --help") == "see --help"          # not a field: left alone


def test_a_new_sweep_never_shows_the_previous_points(tmp_path):
    """Issue 19: a new sweep left the previous point's Gantt chart and memory plot under
    the new plot. While the new sweep runs, and after it, picker and detail are its own."""
    ts = TileSweep(BASE, {"vocab_tile": "32,64"}, cache_dir=tmp_path, isolate=False,
                   peak_gflops=100.0)
    ts.run()
    ts.point.value = 0
    assert ts.gantt.figure is not None and len(ts.detail.children) == 3
    old_canvas = ts.gantt.figure.canvas
    seen = []

    def check(row):        # at each point of the new sweep
        seen.append((list(ts.point.options), ts.detail.children, ts.gantt.figure))
    ts.tiles["vocab_tile"].value = "16,32"
    orig = ts._on_point
    ts._on_point = lambda row: (check(row), orig(row))
    ts.run()
    assert seen and all(opts == [] and children == () and fig is None
                        for opts, children, fig in seen)
    assert [label for label, _ in ts.point.options] == ["vocab_tile=16", "vocab_tile=32"]
    assert ts.detail.children == () and ts.point.value is None
    assert old_canvas.comm is None and old_canvas.toolbar.comm is None   # closed, not hidden


def test_nothing_ran_is_said_in_words(tmp_path):
    """A bad tile (0) drew empty axes with a red × at 0: now a sentence, and no axes."""
    ts = TileSweep(BASE, {"vocab_tile": "0"}, cache_dir=tmp_path, isolate=False,
                   peak_gflops=100.0)
    df = ts.run()
    assert df["gflops"].isna().all() and ts.status.value == "done: 1 points, none ran"
    assert ts.plot.figure is None
    assert "none of the 1 points ran (the messages above say why)" in ts.plot.text
    words = ts.plot.shown
    assert ts.plot.box.outputs[0]["data"]["application/vnd.jupyter.widget-view+json"][
        "model_id"] == words.model_id
    assert "nl-sweep-plot-words" in words._dom_classes and "none of the 1" in words.value
    assert "vocab_tile=0 must be from 1" in ts.message.value
    from nntile_lab.plots.sweep import scheduler_figure, tile_figure
    for fig in (tile_figure(df), scheduler_figure(df)):   # the library's figures too
        assert not fig.axes and "none of the 1 points ran" in fig.texts[0].get_text()


def test_scheduler_plot_is_sharp_uncut_and_says_what_its_bars_are(tmp_path):
    """Issue 19: a 480×336 PNG stretched to 1164×815 with the y label cut and a title
    contradicting the label. Now a live canvas at the figure's size; every label inside."""
    ss = SchedulerSweep(BASE, ["eager", "lws"], repeats=2, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    ss.run()
    fig = ss.plot.figure
    assert isinstance(fig.canvas, Canvas)
    ax = fig.axes[0]
    title, ylabel = ax.get_title(), ax.get_ylabel()
    assert "whiskers: min–max over repeats" in title and "2 repeats each" in title
    assert ylabel == "GFLOP/s (median)" and "steps" not in title
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    box = fig.bbox
    for artist in (ax.yaxis.label, ax.title, *ax.get_xticklabels()):
        assert artist.get_text()
        ext = artist.get_window_extent(renderer)
        assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1, \
            artist


def test_trace_explorer_empty_slice_titles_colours_and_zoom():
    tr = traced_gpt2()[0]
    tx = TraceExplorer(tr)
    whole = tx.plot.figure
    t = tr.tasks
    # an empty slice of values each in the trace: words in the table and the plot, no error
    # (the old explorer said "phase='forward' is not in this trace" and kept the last plot)
    values = {c: sorted(set(t[c].dropna())) for c in ("step", "worker", "layer", "phase")}
    empty = next((s, w, la, p) for s in values["step"] for w in values["worker"]
                 for la in values["layer"] for p in values["phase"]
                 if not len(t[(t["step"] == s) & (t["worker"] == w) & (t["layer"] == la)
                              & (t["phase"] == p)]))
    tx.step.value, tx.worker.value, tx.layer.value, tx.phase.value = empty
    assert "no task in this slice" in tx.table.value and "Error" in tx.table.value
    assert tx.plot.figure is None and "no task in this slice" in tx.plot.text
    assert whole.canvas.comm is None              # the previous slice's canvas is gone
    # a step selected: the title names the slice, never "whole trace"
    tx.worker.value, tx.layer.value, tx.phase.value = None, None, "backward"
    title = tx.plot.figure.axes[0].get_title()
    assert f"step {empty[0]}, backward" in title and "whole trace" not in title
    # each op keeps its whole-trace colour in the slice
    full = viz.op_colors(t["name"])
    for coll in tx.plot.figure.axes[0].collections:
        name = coll.get_gid().split(":")[2]
        assert np.allclose(coll.get_facecolor()[0][:3], full[name])
    # zooming (the toolbar sets the x limits) updates the range shown under the plot
    ax = tx.plot.figure.axes[0]
    before = tx.range.value
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo + (hi - lo) / 4, lo + (hi - lo) / 2)
    assert tx.range.value != before and tx.range.value == \
        f"showing {lo + (hi - lo) / 4:.3f}–{lo + (hi - lo) / 2:.3f} ms"
    # a selection that cannot be drawn: said in the widget, not only in the log console
    tx.trace = tr.__class__.__new__(tr.__class__)   # a broken trace: no tables
    tx.layer.value = tx.layer.options[1][1]
    assert "Error" in tx.table.value and tx.plot.figure is None


def test_each_point_shows_what_was_predicted_for_it(tmp_path):
    """Item 4 of issue 30: the tile sweep shows, beside each measured point, the GFLOP/s
    tune predicted for it from the points before (hollow markers in the plot)."""
    ts = TileSweep(BASE, {"vocab_tile": "16,32,64"}, cache_dir=tmp_path, peak_gflops=100.0)
    df = ts.run()
    assert df["predicted_gflops"].notna().all() and (df["predicted_gflops"] > 0).all()
    assert "no predictions" not in ts.message.value
    labels = [t.get_text() for t in ts.plot.figure.axes[0].get_legend().get_texts()]
    assert "predicted (before measuring)" in labels


def test_find_the_best_tiles_button(tmp_path):
    ts = TileSweep(BASE, {"vocab_tile": "16,32,64", "batch_tile": "1,2"}, cache_dir=tmp_path,
                   peak_gflops=100.0)
    assert ts.tune_button.description == "Find the best tiles"
    assert "nl-sweep-tune" in ts.tune_button._dom_classes
    ts.budget.value = "2m"
    ts.tune_button.click()
    assert ts.running and ts.wait(600) and ts.background.error is None
    res = ts.tuned
    assert res.best is not None and res.best.vocab_tile in (16, 32, 64)
    assert ts.status.value.startswith("done: best tiling: ")
    assert "train with it: nntile-lab train" in ts.message.value
    # the plot: measured against predicted, the chosen tiling starred
    left = ts.plot.figure.axes[0]
    assert left.get_xlabel() == "predicted step (ms)"
    assert any("chosen" in t.get_text() for t in left.get_legend().get_texts())
    # bad input: said in the widget, nothing run
    ts.budget.value = "soon"
    assert ts.find_best() is None and "budget" in ts.message.value
    assert ts.status.value == "not run"


# a Llama (issue 28 §3): RMS norms, rotary positions, a gated MLP, 2 query heads a kv head
LLAMA = BASE.replace(model="llama", n_kv_head=1)


def test_the_widgets_sweep_a_llama(tmp_path):
    """The tile sweep and the scheduler sweep run the base spec's model, not GPT-2: its
    points, predictions and traces are the Llama's; a trace of its step names layers and
    phases as GPT-2's does."""
    from nntile_lab.trace import Trace
    ts = TileSweep(LLAMA, {"vocab_tile": "32,64"}, cache_dir=tmp_path / "t",
                   peak_gflops=100.0)
    assert "<b>model</b> llama" in ts.view.children[0].children[0].children[0].value
    df = ts.run()
    assert (df["status"] == "fits").all(), df["error"].tolist()
    assert set(df["model"]) == {"llama"} and set(df["n_kv_head"]) == {1}
    assert df["predicted_gflops"].notna().all()      # tune's dry run of the Llama's step
    assert "no predictions" not in ts.message.value
    assert "Tile sweep of llama" in _titles(ts.plot.figure)
    t = Trace.load(df.loc[0, "trace_dir"]).tasks
    names = set(t["name"])
    assert {"rms_norm_tile", "rope", "silu_gate", "rope_backward"} <= names
    assert not names & {"layer_norm_tile", "gelu"}
    # the block's rotary positions in layer 0's forward, their backward in its backward
    for op, phase in (("rope", "forward"), ("rope_backward", "backward")):
        mine = t[t["name"] == op]
        assert set(mine["layer"]) == {0} and set(mine["phase"]) == {phase}
    assert set(t["phase"]) == {"forward", "backward", "optimizer"}
    assert set(t["layer"]) == {-1, 0, 1}     # none, the block, the head (n_layer 1)
    tx = TraceExplorer(df.loc[0, "trace_dir"])
    assert "rms_norm_backward_tile" in set(tx.select(layer=0, phase="backward")["name"])

    ss = SchedulerSweep(LLAMA, ["eager", "lws"], repeats=1, cache_dir=tmp_path / "s",
                        isolate=False, peak_gflops=100.0)
    df = ss.run()
    assert (df["status"] == "fits").all() and set(df["model"]) == {"llama"}
    assert ss.status.value.startswith("done: 2 points, best ")
    assert "Schedulers on llama" in _titles(ss.plot.figure)
    assert "silu_gate_backward" in set(Trace.load(df.loc[1, "trace_dir"]).tasks["name"])


def _titles(fig) -> str:
    """Every title a figure shows (its axes' and the figure's own), one string."""
    return " ".join([fig.get_suptitle()] + [ax.get_title() for ax in fig.axes])
