"""The widgets driven without a browser: their callbacks are plain methods."""
import pytest

from nntile_lab.spec import ExperimentSpec
from nntile_lab.widgets import SchedulerSweep, TileSweep, TraceExplorer, applicable_schedulers
from tests.trace.conftest import traced_gpt2

BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=3, ncpu=2)
PNG = b"\x89PNG\r\n\x1a\n"


def test_tile_sweep_button_plots_live_and_shows_a_point(tmp_path):
    ts = TileSweep(BASE, {"vocab_tile": "32,64,0"}, cache_dir=tmp_path, peak_gflops=100.0)
    assert ts.run_button.description == "Run sweep"
    assert "nl-sweep-run" in ts.run_button._dom_classes
    assert "nl-sweep-plot" in ts.plot._dom_classes
    drawn = []
    ts.plot.observe(lambda c: drawn.append(c["new"]), names="value")
    ts.run_button.click()                           # what the browser's click does
    df = ts.df
    assert len(df) == 3 and len(drawn) == 3        # redrawn after each point
    assert all(bytes(d).startswith(PNG) for d in drawn)
    assert ts.status.value.startswith("done: 3 points, best vocab_tile=")
    assert "vocab_tile=0: vocab_tile=0 (--vocab-tile) must be from 1" in ts.message.value
    assert [v for _, v in ts.point.options] == [0, 1]
    ts.point.value = 1                               # picking a point shows its trace
    gantt, memory = ts.detail.children[1:]
    assert bytes(gantt.value).startswith(PNG) and bytes(memory.value).startswith(PNG)
    assert "vocab_tile=64" in ts.detail.children[0].value
    again = ts.run()                                 # from the cache
    assert again["cached"].tolist() == [True, True, False]
    (tmp_path / f"{again.loc[0, 'key']}.json").write_text("{torn")
    assert ts.run()["cached"].tolist() == [False, True, False]
    assert "is corrupt" in ts.message.value and "runs again" in ts.message.value


@pytest.mark.parametrize("model, tiles, message", [
    ({}, {"vocab_tile": "abc"}, "--vocab-tile &#x27;abc&#x27;: not a valid int"),
    ({"n_head": 3}, {"vocab_tile": "32"}, "n_embd=16 is not divisible by n_head=3"),
    ({}, {}, "no tile sizes to vary"),
    ({"batch": 0}, {"vocab_tile": "32"}, "batch=0 (--batch) must be ≥ 1"),
])
def test_tile_sweep_bad_input_is_a_message(tmp_path, model, tiles, message):
    ts = TileSweep(BASE, tiles, cache_dir=tmp_path, peak_gflops=100.0)
    for name, value in model.items():
        ts.model[name].value = value
    assert ts.run() is None
    assert "Error:" in ts.message.value and message in ts.message.value
    assert ts.status.value == "0 points" and not ts.run_button.disabled


def test_scheduler_sweep_bars_over_repeats(tmp_path):
    assert "lws" in applicable_schedulers() and "graph_test" not in applicable_schedulers()
    ss = SchedulerSweep(BASE, ["eager", "lws"], repeats=2, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    assert "nl-sched-run" in ss.run_button._dom_classes
    df = ss.run()
    assert len(df) == 4 and df["error"].isna().all() and sorted(set(df["seed"])) == [0, 1]
    assert ss.status.value.startswith("done: 4 points, best ")
    assert bytes(ss.plot.value).startswith(PNG)
    from nntile_lab.sweep.plots import aggregate_repeats
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
    assert bytes(tx.plot.value).startswith(PNG) and f"{len(tr.tasks)} tasks" in tx.table.value
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
    with pytest.raises(KeyboardInterrupt):
        ts.run()
    assert ts.status.value.startswith("interrupted after 1 of 2 points")
    assert not ts.run_button.disabled
    monkeypatch.undo()
    assert ts.run()["cached"].tolist() == [True, False]


def test_bad_points_are_messages_and_the_rest_runs(tmp_path):
    """Issue 9 item 7 in the widget: a tile larger than its dimension or zero, a cache file
    from an older version, a model that does not fit, an unknown scheduler."""
    ts = TileSweep(BASE, {"vocab_tile": "32,65,0"}, cache_dir=tmp_path, isolate=False,
                   peak_gflops=100.0)
    df = ts.run()
    assert df["error"].isna().tolist() == [True, False, False] and df.loc[0, "gflops"] > 0
    assert ts.status.value.startswith("done: 3 points, best vocab_tile=32: ")
    assert "vocab_tile=65: vocab_tile=65 (--vocab-tile) must be from 1 to vocab_size=64" \
        in ts.message.value
    assert "vocab_tile=0: vocab_tile=0 (--vocab-tile) must be from 1" in ts.message.value
    path = tmp_path / f"{df.loc[0, 'key']}.json"
    path.write_text(path.read_text().replace('"format": 1', '"format": 0'))
    again = ts.run()                       # the old record is measured again, with a notice
    assert again["cached"].tolist() == [False, False, False] and again.loc[0, "gflops"] > 0
    assert "has format 0" in ts.message.value and "older version" in ts.message.value
    # a model that cannot run under its memory cap: rows with the planner's reason
    capped = TileSweep(BASE.replace(memory_limit_mb=16), {"vocab_tile": "32,64"},
                       cache_dir=tmp_path, isolate=False, peak_gflops=100.0)
    capped.model["n_embd"].value = 512   # caps under 16 MiB are refused by the spec itself
    df = capped.run()
    assert len(df) == 2 and df["gflops"].isna().all()
    assert capped.status.value == "done: 2 points, none ran"
    assert "Error:" not in capped.message.value     # a notice per point: the sweep ran
    assert capped.message.value.count("cannot run under these memory settings: the step "
                                      "needs 50 MiB but the cap is 16 MiB") == 2
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
    """The priorities toggle doubles the points (off/on); a policy that cannot take them
    (heteroprio) is a row with the reason and the others still run."""
    ss = SchedulerSweep(BASE, ["lws", "heteroprio"], repeats=1, cache_dir=tmp_path,
                        isolate=False, peak_gflops=100.0)
    ss.priorities.value = True
    df = ss.run()
    got = {(r.scheduler, r.priorities): r.error for r in df.itertuples()}
    assert set(got) == {("lws", False), ("lws", True), ("heteroprio", False),
                        ("heteroprio", True)}
    assert got[("lws", False)] is None and got[("lws", True)] is None
    assert got[("heteroprio", False)] is None
    assert "heteroprio" in got[("heteroprio", True)] and "priorities=False" in \
        got[("heteroprio", True)]
    assert (df[df["error"].isna()]["gflops"] > 0).all()
    assert ss.status.value.startswith("done: 4 points, best ")
    assert "prio, lws, dmdas and dmdasd honour them" in ss.message.value
    assert "priorities=False" in ss.message.value          # the failed point, named
    from nntile_lab.sweep.plots import aggregate_repeats
    agg = aggregate_repeats(df)
    ran = {(r.scheduler, r.priorities): r.repeats for r in agg.itertuples()}
    assert ran == {("lws", False): 1, ("lws", True): 1, ("heteroprio", False): 1,
                   ("heteroprio", True): 0}
    assert bytes(ss.plot.value).startswith(PNG)
