"""Figures never lose a measurement and never draw an error as a result: measuring a subset
of sizes into an existing --out keeps the other sizes' records (and draws them); records of
other settings, damaged ones and re-measured ones are moved aside, never deleted;
--from A --out B draws into B and leaves A alone; a point that failed for a non-memory
reason is "failed" with its reason in the plot's CSV, points.csv and summary.md, and the
command exits 1; a mistyped option is refused before any point runs."""
from __future__ import annotations

import csv
import datetime
import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest

from nntile_lab.engine import store as store_mod
from nntile_lab.figures import FigurePlan
from nntile_lab.figures import run as run_mod
from nntile_lab.figures.family import point_spec
from nntile_lab.figures.records import (
    SET_ASIDE,
    check_record,
    read_records,
    record_path,
    set_aside,
)
from nntile_lab.figures.run import point_list, run_figures
from tests.jupyter_kernel import REPO

PLAN = FigurePlan(layers=(4,), embds=(64, 128, 192), batch=2, seq_len=16, cap_mb=100,
                  bf16=False, measure_steps=1, point_timeout_s=60,
                  systems=("nntile_lab", "torch_fp32"))


def fake_point(status="ok", error=None):
    def run_point(plan, system, n_layer, n_embd):
        gf = float(n_embd) if status == "ok" else 0.0
        return {"system": system, "n_layer": n_layer, "n_embd": n_embd, "gflops": gf,
                "status": status, "error": error, "step_time_s": 0.5, "tokens_per_s": 64.0,
                "peak_mb": 7.0, "out_of_core": False,
                "memory": {"parameters": 1 << 20} if status == "ok" else None}
    return run_point


@pytest.fixture
def measured(tmp_path, monkeypatch):
    monkeypatch.setattr(run_mod, "run_point", fake_point())
    run_figures(PLAN, tmp_path, progress=False)
    return tmp_path


def names(d):
    return sorted(p.name for p in (d / "records").glob("*.json"))


def test_measuring_a_subset_keeps_and_draws_the_other_sizes(measured, monkeypatch):
    before = names(measured)
    assert len(before) == 6
    calls = []
    monkeypatch.setattr(run_mod, "run_point",
                        lambda *a: calls.append(a[1:]) or fake_point()(*a))
    df = run_figures(replace(PLAN, embds=(128,)), measured, progress=False)
    assert names(measured) == before          # the 64 and 192 records are still there
    assert calls == []                         # and E=128 was reused, not re-measured
    assert sorted(set(df.n_embd)) == [64, 128, 192]
    with open(measured / "throughput_L4.csv") as f:
        assert len(list(csv.DictReader(f))) == 3


def test_other_settings_and_re_measured_points_are_moved_aside_not_deleted(measured,
                                                                           monkeypatch, capsys):
    monkeypatch.setattr(run_mod, "run_point", fake_point())
    run_figures(replace(PLAN, cap_mb=200, embds=(64,)), measured, progress=False)
    aside = sorted(p.name for p in (measured / SET_ASIDE).rglob("*.json"))
    assert len(aside) == 6 and "measured with other settings" in capsys.readouterr().err
    run_figures(replace(PLAN, cap_mb=200, embds=(64,)), measured, progress=False,
                resume=False)   # --fresh: the records it replaces are kept aside too
    assert len(list((measured / SET_ASIDE).rglob("*.json"))) == 8


def test_the_same_point_set_aside_twice_in_one_second_keeps_both(tmp_path, monkeypatch):
    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2026, 1, 2, 3, 4, 5)

    monkeypatch.setattr(store_mod.datetime, "datetime", Frozen)
    kept = []
    for text in ("first", "second", "third"):
        (tmp_path / "records").mkdir(exist_ok=True)
        (tmp_path / "records" / "p.json").write_text(text)
        kept.append(set_aside(tmp_path, tmp_path / "records" / "p.json", "test"))
    assert len(set(kept)) == 3 and [p.read_text() for p in kept] == ["first", "second", "third"]


def test_from_a_out_b_draws_into_b_and_leaves_a_alone(measured):
    before = {p.name: p.stat().st_mtime_ns for p in measured.rglob("*") if p.is_file()}
    out = measured.parent / "elsewhere"
    res = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "figures", "--from",
                          str(measured), "--out", str(out)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (out / "throughput_L4.png").stat().st_size > 0 and (out / "summary.md").exists()
    after = {p.name: p.stat().st_mtime_ns for p in measured.rglob("*") if p.is_file()}
    assert after == before


def test_a_failed_point_is_shown_failed_with_its_reason_and_exits_1(tmp_path, monkeypatch):
    why = "ValueError: unknown scheduler 'lwz'"
    monkeypatch.setattr(run_mod, "run_point", fake_point())
    run_figures(PLAN, tmp_path, progress=False)
    monkeypatch.setattr(run_mod, "run_point", fake_point("error", why))
    df = run_figures(replace(PLAN, embds=(128,), systems=("nntile_lab",)), tmp_path,
                     progress=False, resume=False)
    row = df[(df.system == "nntile_lab") & (df.n_embd == 128)].iloc[0]
    assert row.status == "error" and math.isnan(row.gflops)
    with open(tmp_path / "throughput_L4.csv") as f:
        rows = {r["model size"]: r for r in csv.DictReader(f)}
    failed_row = [r for r in rows.values() if r["nntile_lab failed"]]
    assert len(failed_row) == 1 and why in failed_row[0]["nntile_lab failed"]
    assert failed_row[0]["nntile_lab"] == ""   # no 0: it measured nothing, it did fit
    with open(tmp_path / "points.csv") as f:
        assert any(r["status"] == "error" and why in r["error"] for r in csv.DictReader(f))
    summary = (tmp_path / "summary.md").read_text()
    assert "1 point(s) failed" in summary and why in summary and "| failed |" in summary
    res = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "figures", "--from",
                          str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 1 and why in res.stderr


def test_memory_is_the_only_cause_called_did_not_fit(monkeypatch):
    from nntile_lab import engine
    from nntile_lab.figures import point
    from nntile_lab.figures.records import figure_result
    spec = point_spec(1, 64, PLAN)
    for exc, status in ((MemoryError("cap"), "out_of_memory"), (ValueError("bad"), "error")):
        def boom(spec, ctx, exc=exc):
            raise exc
        monkeypatch.setattr(point, "measure_point", boom)
        rec = engine.run_point(engine.Point("figure", spec, {"system": "nntile_lab"},
                                            kind="figure-point"), isolate=False)
        assert figure_result(rec)["status"] == status


@pytest.mark.parametrize("flag,value,message", [
    ("--scheduler", "lwz", "--scheduler 'lwz': unknown; choose from"),
    ("--cap-mb", "1", "argument --cap-mb: 1 is out of range: give an integer from 16"),
    ("--embds", "100", "--embds 100: must be a multiple of 64"),
    ("--ncpu", "99", "--ncpu 99: must be from 1 to"),
    ("--batch", "0", "argument --batch: 0 is out of range")])
def test_a_bad_option_is_refused_before_any_point(tmp_path, flag, value, message):
    res = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "figures", "--smoke", "--out",
                          str(tmp_path), flag, value], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "records").exists()


DAMAGED = {
    "not an object": [1, 2],
    "no result": {"kind": "figure_point", "record_version": 1, "plan": {"cap_mb": 1,
                                                                      "vocab_size": 2}},
    "null result": {"kind": "figure_point", "record_version": 1, "result": None,
                    "plan": {"cap_mb": 1, "vocab_size": 2}},
    "mistyped gflops": {"kind": "figure_point", "record_version": 1,
                        "plan": {"cap_mb": 1, "vocab_size": 2},
                        "result": {"system": "nntile_lab", "n_layer": 4, "n_embd": 64,
                                   "status": "ok", "gflops": "fast"}},
    "string n_layer": {"kind": "figure_point", "record_version": 1,
                       "plan": {"cap_mb": 1, "vocab_size": 2},
                       "result": {"system": "nntile_lab", "n_layer": "4", "n_embd": 64,
                                  "status": "ok", "gflops": 1.0}},
}


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_record_is_named_on_redraw_and_remeasured_on_run(measured, monkeypatch,
                                                                   kind):
    path = record_path(measured, "torch_fp32", 4, 128)
    path.write_text(json.dumps(DAMAGED[kind]))
    with pytest.raises(ValueError, match=r"torch_fp32_L4_E128\.json is (not a|a damaged)"):
        read_records(measured)
    calls = []
    monkeypatch.setattr(run_mod, "run_point",
                        lambda *a: calls.append(a[1:]) or fake_point()(*a))
    run_figures(PLAN, measured, progress=False)
    assert calls == [("torch_fp32", 4, 128)]
    check_record(json.loads(path.read_text()), path)
    assert len(list((measured / SET_ASIDE).rglob("*.json"))) == 1
    assert len(point_list(PLAN)) == len(read_records(measured))
