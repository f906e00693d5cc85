"""``nntile-lab bench schedulers`` at a tiny size, its grid, and ``trace.idle`` on
hand-made task timelines whose split is known exactly."""
import json
import types

import pandas as pd
import pytest

from nntile_lab import memory
from nntile_lab.bench import schedulers
from nntile_lab.cli import main
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import idle

TINY = ["--n-layer", "2", "--n-embd", "128", "--n-head", "2", "--vocab-size", "8192",
        "--seq-len", "64", "--batch", "8", "--vocab-tile", "1024", "--inner-tile", "256",
        "--measure-steps", "2"]
TINY_SPEC = ExperimentSpec(n_layer=2, n_embd=128, n_head=2, vocab_size=8192, seq_len=64,
                           batch=8, vocab_tile=1024, inner_tile=256, measure_steps=2)


def test_points_cover_every_cell(tmp_path):
    pts = schedulers.points(TINY_SPEC, ("lws", "heteroprio"), repeats=2, ooc_fraction=0.5,
                            ooc_dir=str(tmp_path))
    cells = {(p.memory_limit_mb is None, p.scheduler, p.priorities) for p in pts}
    assert cells == {(m, s, p) for m in (True, False)
                     for s, p in (("lws", True), ("lws", False), ("heteroprio", False))}
    assert len(pts) == 2 * 3 * 2 and {p.seed for p in pts} == {0, 1}
    ooc = [p for p in pts if p.memory_limit_mb is not None]
    peak = memory.estimate(TINY_SPEC).peak_bytes / 2**20
    assert all(p.memory_limit_mb < peak and p.ooc_dir == str(tmp_path) for p in ooc)
    assert all(memory.estimate(p).verdict == "fits_with_disk" for p in ooc)


def test_bad_settings_say_what_to_change(tmp_path):
    with pytest.raises(ValueError, match="ooc_fraction=1.5 must be between 0 and 1"):
        schedulers.out_of_core(TINY_SPEC, 1.5, str(tmp_path))
    with pytest.raises(ValueError, match="not below the step's peak"):
        schedulers.out_of_core(ExperimentSpec(n_layer=1, n_embd=16, n_head=1, vocab_size=64,
                                              seq_len=8, batch=2), 0.5, str(tmp_path))
    with pytest.raises(ValueError, match="repeats=0"):
        schedulers.points(TINY_SPEC, repeats=0)


def test_cli_writes_table_figure_and_record(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["bench", "schedulers", *TINY, "--schedulers", "eager,lws,heteroprio",
               "--repeats", "1", "--ooc-dir", str(tmp_path / "ooc"), "--cache",
               str(tmp_path / "cache"), "--in-process", "--no-progress", "--out", str(out),
               "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(res["summary"])
    assert len(rows) == 2 * 5          # 2 modes × (eager, lws) × on/off + heteroprio off
    assert rows["error"].isna().all(), rows["error"].tolist()
    assert set(rows[rows["scheduler"] == "heteroprio"]["priorities"]) == {False}
    assert set(rows["mode"]) == {"in memory", "out of core (28 MiB cap)"}
    assert (rows["step_ms"] > 0).all() and (rows["step_min_ms"] <= rows["step_ms"]).all()
    for share in ("idle_share", "overhead_share", "both_idle_submission_share"):
        assert rows[share].between(0, 1).all(), share
    assert (out / "schedulers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "schedulers.md").read_text()
    assert md.count("\n") == 2 + len(rows) and "| out of core (28 MiB cap) | lws | on |" in md
    rec = json.loads((out / "schedulers.json").read_text())
    assert rec["kind"] == "bench-schedulers" and len(rec["results"]["points"]) == 10


def _trace(tasks, steps, workers=(0, 1)):
    t = pd.DataFrame(tasks, columns=["worker", "submit_us", "ready_us", "start_us", "end_us",
                                     "name"])
    return types.SimpleNamespace(tasks=t, steps=pd.DataFrame(steps, columns=["step", "start_us",
                                                                             "end_us"]),
                                 workers=pd.DataFrame({"worker": list(workers)}))


def test_idle_split_of_a_known_timeline():
    # one step [0, 100]; worker 0: a, ready at 5, runs 10–25; b, ready at 45, runs 50–90.
    # worker 1: c runs 0–20; d, ready at 15 (before c ended), runs 30–60.
    tr = _trace([(0, 0, 5, 10, 25, "a"), (0, 0, 45, 50, 90, "b"),
                 (1, 0, 0, 0, 20, "c"), (1, 0, 15, 30, 60, "d")], [(0, 0, 100)])
    s = idle.worker_split(tr)
    assert s["kernel_us"] == 15 + 40 + 20 + 30
    # overhead: a 10−max(0,5)=5; b 50−45=5; c 0; d 30−20=10
    assert s["overhead_us"] == 20
    # waiting: a 5 (0→5); b 20 (25→45); tails: worker 0 10, worker 1 40
    assert s["waiting_us"] == 5 + 20 + 10 + 40
    assert s["window_us"] == 200 == s["kernel_us"] + s["overhead_us"] + s["waiting_us"]
    gaps = idle.both_idle(tr)
    # both idle: 25–30 (d submitted at 0: runtime) and 90–100 (the step's end)
    assert gaps[["start_us", "end_us", "cause"]].values.tolist() == [
        [25.0, 30.0, "runtime"], [90.0, 100.0, "submission"]]
    b = idle.breakdown(tr)
    assert b["both_idle_share"] == pytest.approx(0.15)
    assert b["both_idle_submission_share"] == pytest.approx(0.1)
    assert b["overhead_share"] == pytest.approx(0.1)


def test_both_idle_waiting_for_python_is_submission():
    # worker 0 ends at 30, the next task is submitted at 50 (Python was busy): 30–55 is
    # Python's gap; a second step is its own window
    tr = _trace([(0, 0, 0, 0, 30, "a"), (1, 50, 52, 55, 80, "b"), (0, 100, 100, 101, 150, "c")],
                [(0, 0, 80), (1, 80, 150)])
    gaps = idle.both_idle(tr)
    assert gaps[["step", "start_us", "end_us", "cause", "next_task"]].values.tolist() == [
        [0, 30.0, 55.0, "submission", "b"], [1, 80.0, 101.0, "submission", "c"]]
