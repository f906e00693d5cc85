"""Issue 33: widgets never show a stale result beside an input error, their number boxes
refuse what is not a whole number, a sweep of more than 500 points waits for a
confirmation, and their builders name what they expect. Driven without a browser (the
browser tests do the same in Chromium)."""
import pandas as pd
import pytest

from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep.size import MAX_POINTS
from nntile_lab.widgets import SchedulerSweep, TileSweep, TraceExplorer
from tests.trace.conftest import traced_gpt2

BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=2, ncpu=2)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A tile sweep that ran (two points): its plot, status and picker are shown."""
    cache = tmp_path_factory.mktemp("cache")
    ts = TileSweep(BASE, {"vocab_tile": "32,64"}, cache_dir=cache, isolate=False,
                   peak_gflops=100.0)
    assert ts.run() is not None
    return ts, cache


def _shows_nothing_of_a_sweep(ts) -> bool:
    return (ts.df is None and ts.plot.shown is None and ts.plot.box.outputs == ()
            and ts.point.options == () and ts.detail.children == ()
            and ts.gantt.shown is None and not ts.status.value.startswith("done"))


@pytest.mark.parametrize("field, text, said", [
    ("n_embd", "0", "n_embd=0"),
    ("n_layer", "-1", "n_layer=-1"),
    ("n_head", "3", "n_embd=16 is not divisible by n_head=3"),
    ("batch", "0", "batch=0 must be ≥ 1"),
    ("n_embd", "2.5", "n_embd=&#x27;2.5&#x27; is not a whole number: enter an integer"),
    ("seq_len", "", "seq_len=&#x27;&#x27; is not a whole number"),
    ("vocab_tile", "512:128:64", "vocab_tile &#x27;512:128:64&#x27;: LOW=512 is above "
                                 "HIGH=128; a range is LOW:HIGH:STEP with LOW ≤ HIGH"),
    ("vocab_tile", "1:99999999:1", "vocab_tile &#x27;1:99999999:1&#x27; has 99,999,999 "
                                   "values: no sweep can measure that many"),
    ("vocab_tile", "", "no tile sizes to vary: every tile box is empty"),
    ("ncpu", "2.5", "workers=&#x27;2.5&#x27; is not a whole number: enter an integer from 1"),
    ("ncpu", "99", "workers=99 is out of range"),
])
def test_an_input_error_clears_the_last_sweep(swept, field, text, said):
    ts, _ = swept
    ts.run()                                 # from the cache: plot, picker, "done" shown
    ts.point.value = 1
    assert ts.status.value.startswith("done: 2 points") and ts.gantt.shown is not None
    box = ts.ncpu if field == "ncpu" else ts.model.get(field) or ts.tiles[field]
    old = box.value
    box.value = text
    try:
        assert ts.run() is None
        assert said in ts.message.value and "Error:" in ts.message.value
        assert "--" not in ts.message.value and "messages above" not in ts.message.value
        assert _shows_nothing_of_a_sweep(ts)
        assert ts.status.value == "not run: the values have an error (below)"
        assert box.value == text             # what was typed stays (2.5 is not 25)
    finally:
        box.value = old


def test_a_big_sweep_waits_for_confirmation(swept, monkeypatch):
    ts, cache = swept
    ts.run()
    ts.tiles["vocab_tile"].value = "1:2048:1"
    ts.tiles["batch_tile"].value = "1,2"
    try:
        ran = []
        def measure(pts):            # never 4096 points here: count them and stop
            ran.append(pts)
            raise RuntimeError("not measured in this test")
        monkeypatch.setattr(ts, "_measure", measure)
        assert ts.run() is None and not ran
        assert ts.status.value == "not run: 4,096 points need confirming (below)"
        assert "this sweep has 4,096 points (batch_tile 2 × vocab_tile 2048), about " \
            in ts.message.value and f"more than {MAX_POINTS}" in ts.message.value
        assert ts.confirm_button.description == "Run all 4,096 points"
        assert ts.confirm_button.layout.display is None          # shown
        assert _shows_nothing_of_a_sweep(ts)
        assert len(ts.points(confirmed=True)) == 4096            # the button's run
        ts.run(confirmed=True)
        assert len(ran) == 1 and len(ran[0]) == 4096
        assert ts.confirm_button.layout.display == "none"
        # 100 000 points: the same question, never a start
        ts.tiles["batch_tile"].value = ""
        ts.tiles["vocab_tile"].value = "1:100000:1"
        assert ts.run() is None and len(ran) == 1
        assert "100,000 points" in ts.status.value
    finally:
        ts.tiles["vocab_tile"].value, ts.tiles["batch_tile"].value = "32,64", ""


def test_scheduler_sweep_input_errors(tmp_path):
    ss = SchedulerSweep(BASE, ["eager"], repeats=1, cache_dir=tmp_path, isolate=False,
                        peak_gflops=100.0)
    assert ss.run() is not None and ss.plot.shown is not None
    for box, text, said in ((ss.repeats, "2.5", "repeats=&#x27;2.5&#x27; is not a whole "
                             "number: enter an integer from 1 to 20"),
                            (ss.repeats, "100", "repeats=100 is out of range: enter an "
                             "integer from 1 to 20"),
                            (ss.nopencl, "-1", "OpenCL workers=-1 is out of range")):
        box.value = text
        assert ss.run() is None and said in ss.message.value
        assert ss.plot.shown is None and ss.status.value.startswith("not run")
        assert box.value == text
        box.value = "1" if box is ss.repeats else "0"
        assert ss.run() is not None and ss.plot.shown is not None
    ss.schedulers.value = ()
    assert ss.run() is None and ss.plot.shown is None
    assert "no scheduler selected: pick one or more in the schedulers list" \
        in ss.message.value
    # the builder: repeats out of range is an error, not silently 20; one name is one name
    with pytest.raises(ValueError, match=r"repeats=100\): give an integer from 1 to 20"):
        SchedulerSweep(BASE, ["eager"], repeats=100)
    with pytest.raises(ValueError, match="give an integer"):
        SchedulerSweep(BASE, ["eager"], repeats=2.5)
    assert SchedulerSweep(BASE, "eager").schedulers.value == ("eager",)
    with pytest.raises(TypeError, match="takes scheduler names"):
        SchedulerSweep(BASE, [1, 2])
    assert "graph_test" not in SchedulerSweep(BASE).schedulers.options


@pytest.mark.parametrize("bad", [{"n_layer": 2}, 5, "n_layer=2"])
def test_widget_builders_name_what_they_expect(bad):
    for make in (TileSweep, SchedulerSweep):
        with pytest.raises(TypeError, match=rf"{make.__name__}\(base=...\) takes an "
                                            r"ExperimentSpec .*got "):
            make(bad)
    with pytest.raises(TypeError, match=r"TraceExplorer\(trace\) takes a Trace .*got "):
        TraceExplorer(bad if not isinstance(bad, str) else 5)
    with pytest.raises(TypeError, match="ExperimentSpec\\(\\*\\*d\\) makes one"):
        TileSweep({"n_layer": 2})


def test_tile_sweep_builder_and_point_errors(tmp_path):
    with pytest.raises(TypeError, match=r"TileSweep\(tiles=...\) takes a dict"):
        TileSweep(BASE, "inner_tile=256")
    with pytest.raises(ValueError, match=r"unknown tile field\(s\) \['inner_tiel'\]; the "
                                         "tile fields are batch_tile"):
        TileSweep(BASE, {"inner_tiel": "256"})
    assert TileSweep(BASE, {"vocab_tile": [32, 64]}).tiles["vocab_tile"].value == "32,64"
    assert TraceExplorer is not None and TileSweep(None).base == ExperimentSpec()
    ts = TileSweep(BASE, {"vocab_tile": "32"}, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="no sweep has finished yet: press Run sweep"):
        ts.show_point(0)
    assert "graph_test" not in ts.scheduler.options


def test_trace_explorer_on_a_trace_without_some_columns():
    tr = traced_gpt2()[0]
    for dropped in (["phase"], ["phase", "layer", "step", "worker_name", "flops"]):
        odd = tr.__class__.__new__(tr.__class__)
        odd.__dict__.update(tr.__dict__)
        odd.tasks = tr.tasks.drop(columns=dropped)
        tx = TraceExplorer(odd)
        assert tx.phase.options == (("all", None),)
        assert f"{len(tr.tasks)} tasks (whole trace)" in tx.table.value
        assert f"this trace has no {dropped[0] if len(dropped) == 1 else 'step, layer, phase'}" \
            in tx.table.value
        assert tx.plot.figure is not None
    odd.tasks = pd.DataFrame({"name": ["gemm"]})
    with pytest.raises(ValueError, match="no worker, start_us, end_us, duration_us column"):
        TraceExplorer(odd)
