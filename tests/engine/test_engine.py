"""The engine: one point runner (own process, memory cap, time limit, stop), one record form
(validated; every old form read), one store — with measurements of tests.engine.helpers."""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from nntile_lab.engine import (
    SCHEMA,
    Caps,
    Point,
    Store,
    code_version,
    make_record,
    read_record,
    refused,
    run_point,
    run_points,
    save_record,
)
from nntile_lab.engine.facts import machine_id
from nntile_lab.engine.record import validate
from nntile_lab.interrupts import Interrupted, Stopped, stoppable
from nntile_lab.spec import ExperimentSpec

SPEC = ExperimentSpec(n_layer=1, n_head=1, n_embd=64, vocab_size=64, seq_len=16, batch=2)
OLD = Path(__file__).parent / "old_records"
H = "tests.engine.helpers:"


MINUTE = Caps(timeout_s=60)


def point(fn, caps=MINUTE, **options):
    return Point(H + fn, SPEC, options, caps, kind="test-point")


def children():
    return psutil.Process().children(recursive=True)


def test_a_point_runs_in_its_own_process_and_returns_a_whole_record():
    rec = run_point(point("echo", size=3))
    assert not validate(rec) and rec["schema"] == SCHEMA
    assert rec["status"] == "fits" and rec["reason"] is None and rec["ran"]
    assert rec["results"]["pid"] != os.getpid() and rec["results"]["option_size"] == 3
    assert rec["results"]["n_layer"] == 1 and rec["spec"] == SPEC.to_dict()
    assert rec["kind"] == "test-point" and rec["measure"] == H + "echo"
    assert rec["caps"] == {"memory_mb": None, "timeout_s": 60}
    assert rec["code_version"] == code_version() and rec["cpu_variant"]
    assert rec["machine"]["cores"] == os.cpu_count() and rec["versions"]["numpy"]
    assert 0 < rec["wall_s"] < 60
    here = run_point(point("echo"), isolate=False)
    assert here["status"] == "fits" and here["results"]["pid"] == os.getpid()


def test_a_point_imports_its_modules_before_reading_its_spec():
    p = replace(point("imported"), imports=("tests.engine.registers",))
    assert p.key() == point("imported").key()     # not part of what is measured
    assert run_point(p)["results"] == {"loaded": 1}
    assert run_point(point("imported"))["results"] == {"loaded": 0}
    bad = run_point(replace(point("imported"), imports=("tests.engine.nosuch",)))
    assert bad["status"] == "error" and "No module named 'tests.engine.nosuch'" in bad["reason"]


@pytest.mark.parametrize("isolate", [True, False])
def test_failure_classes(isolate):
    rec = run_point(point("fail"), isolate=isolate)
    assert (rec["status"], rec["reason"]) == ("error", "ValueError: bad tile")
    assert rec["results"] == {"started": 1}      # what it knew before failing
    rec = run_point(point("out_of_memory"), isolate=isolate)
    assert rec["status"] == "oom" and "the step needs 9 GiB" in rec["reason"]


def test_a_crash_a_time_limit_and_the_memory_cap_end_the_point_not_the_study():
    rec = run_point(point("crash"))
    assert rec["status"] == "error" and "killed by SIGABRT" in rec["reason"]
    t0 = time.perf_counter()
    rec = run_point(point("sleep", Caps(timeout_s=1.0), seconds=60))
    assert rec["status"] == "timeout" and "timed out after 1 s" in rec["reason"]
    assert time.perf_counter() - t0 < 10 and not children()
    rec = run_point(point("allocate", Caps(memory_mb=64, timeout_s=60), mib=256))
    assert rec["status"] == "oom" and rec["ran"]
    assert "over the 64 MiB cap" in rec["reason"] and rec["results"]["peak_mb"] > 64
    rec = run_point(point("allocate", Caps(memory_mb=512, timeout_s=60), mib=64))
    assert rec["status"] == "fits" and rec["results"]["touched_mb"] == 64


def test_a_stop_or_ctrl_c_kills_the_point_process_at_once():
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    t0 = time.perf_counter()
    with pytest.raises(Stopped):
        run_point(point("sleep", seconds=60), stop=stop)
    assert time.perf_counter() - t0 < 10 and not children()
    # a stop token of the running action (a Stop button, a kernel interrupt in a thread)
    with stoppable() as token, pytest.raises(Stopped):
        threading.Timer(1.0, token.request).start()
        run_point(point("sleep", seconds=60))
    assert not children()
    # Ctrl-C in the waiting thread
    import _thread
    threading.Timer(1.0, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        run_point(point("sleep", seconds=60))
    assert not children()


def test_run_points_keeps_what_finished_and_resumes(tmp_path):
    store = Store(tmp_path)
    pts = [point("echo", i=i) for i in range(3)]
    seen = []

    def interrupt(rec, cached):
        seen.append(rec)
        if len(seen) == 2:
            raise KeyboardInterrupt
    with pytest.raises(Interrupted, match="points stopped after 2 of 3 points; the finished "
                                          "ones are kept: run it again to resume"):
        run_points(pts, store, isolate=False, progress=False, on_record=interrupt)
    got = run_points(pts, store, isolate=False, progress=False)
    assert [c for _, c in got] == [True, True, False]
    assert [r["results"]["option_i"] for r, _ in got] == [0, 1, 2]
    # failed points are reused, or measured again with retry_errors
    bad = refused(point("echo"), "planned: does not fit", "oom")
    assert run_points([bad], store, progress=False) == [(bad, False)]
    errs = [point("fail")]
    run_points(errs, store, isolate=False, progress=False)
    assert run_points(errs, store, isolate=False, progress=False)[0][1]
    assert not run_points(errs, store, isolate=False, progress=False, retry_errors=True)[0][1]


def test_a_point_that_timed_out_runs_again_under_a_longer_limit(tmp_path):
    store, messages = Store(tmp_path), []
    short = point("sleep", Caps(timeout_s=0.5), seconds=1)
    run_points([short], store, progress=False)
    longer = replace(short, caps=Caps(timeout_s=30))
    assert longer.key() == short.key()    # the limit is not part of what is measured
    ((rec, cached),) = run_points([longer], store, progress=False, messages=messages)
    assert rec["status"] == "fits" and not cached and "timed out after 0.5 s" in messages[0]


def test_the_key_names_what_decides_the_numbers():
    p = point("echo", a=1)
    assert p.key() == point("echo", a=1).key() and len(p.key()) == 16
    assert p.key() != point("echo", a=2).key()
    assert p.key() != replace(p, spec=SPEC.replace(n_embd=128)).key()
    assert p.key() != replace(p, caps=Caps(memory_mb=100)).key()
    assert p.key() != replace(p, kind="other").key()
    assert p.key() == replace(p, inputs={"peak_gflops": 3.0}).key()
    assert p.identity()["machine"] == machine_id() and machine_id()["cores"]
    with pytest.raises(ValueError, match="unknown measurement 'nosuch'"):
        Point("nosuch", SPEC)
    with pytest.raises(ValueError, match=r"caps.timeout_s=0 must be a positive"):
        Caps(timeout_s=0)


def test_the_store_validates_every_read_and_never_deletes(tmp_path):
    store = Store(tmp_path / "recs")
    rec = run_point(point("echo"), isolate=False)
    store.save("a", rec)
    assert store.load("a") == (rec, None) and store.load("none") == (None, None)
    assert "is a test-point record, not a other one" in store.load("a", kind="other")[1]
    store.save("old", rec | {"code_version": "0" * 16})
    assert "measured by code version 0000000000000000" in store.load("old")[1]
    assert store.load("old", code_version=None)[0] is not None
    store.path("torn").write_text('{"schema": 2, "ki')
    assert "is corrupt" in store.load("torn")[1]
    store.path("bad").write_text(json.dumps(rec | {"status": "fits", "results": [1]}))
    assert "is a damaged record (results is list" in store.load("bad")[1]
    recs, problems = store.records()
    assert [p.stem for p, _ in recs] == ["a", "old"] and len(problems) == 2
    lines = []
    moved = store.set_aside(store.path("bad"), "a test", say=lines.append)
    assert moved.exists() and moved.parent.parent.name == "recs.set_aside"
    assert not store.path("bad").exists() and "a test" in lines[0]


def test_a_record_is_refused_before_it_is_written(tmp_path):
    with pytest.raises(ValueError, match="status='done'"):
        make_record("x", SPEC, {}, status="done")
    with pytest.raises(ValueError, match="status error without a reason"):
        make_record("x", SPEC, {}, status="error")
    with pytest.raises(ValueError, match="a measured point without gflops"):
        make_record("sweep-point", SPEC, {"step_time_s": 1.0}, measure="train-trace")
    with pytest.raises(ValueError, match="machine, schema are the record.s own fields"):
        make_record("x", SPEC, {}, **{"machine": 1, "schema": 3})
    path = save_record(tmp_path / "r.json", "x", SPEC, {"loss": float("nan")}, note="kept")
    rec = read_record(path)
    assert rec["results"] == {"loss": None} and rec["note"] == "kept"


# ---- records of every form written before the engine (tests/engine/old_records) ---------
def test_every_old_record_loads():
    paths = sorted(p for p in OLD.rglob("*.json"))
    assert len(paths) == 12
    for p in paths:
        rec = read_record(p)
        assert not validate(rec) and rec["schema"] == SCHEMA, p
        assert rec["machine"]["cores"] and rec["versions"]["numpy"], p


def test_old_sweep_points_train_runs_and_benchmarks_keep_their_meaning():
    points = [read_record(p) for p in sorted((OLD / "sweep_cache").glob("*.json"))]
    crashed = [r for r in points if r["status"] == "error"]
    assert len(crashed) == 1 and "killed by SIGABRT" in crashed[0]["reason"]
    ok = [r for r in points if r["status"] == "fits"]
    assert len(ok) == 2 and all(r["measure"] == "train-trace" and r["results"]["gflops"] > 0
                                for r in ok)
    assert {r["spec"]["vocab_tile"] for r in ok} == {32, 64}
    train = read_record(OLD / "train_run" / "run.json")
    assert train["kind"] == "train" and train["config"]["model"]["n_layer"] == 1
    assert train["results"]["final_loss"] > 0 and train["cpu_variant"] in ("v3", "v4")
    sweep = read_record(OLD / "sweep_out" / "sweep.json")
    assert sweep["kind"] == "sweep" and sweep["axes"] == ["vocab_tile"]
    assert len(sweep["results"]["points"]) == 2
    bench = read_record(OLD / "bench_train.json")
    assert bench["kind"] == "bench-train" and bench["results"]["nntile_gflops"] > 0


def test_old_figure_records_keep_their_statuses():
    from nntile_lab.figures.records import figure_result, read_records
    got = {(figure_result(r)["system"], figure_result(r)["n_embd"]): figure_result(r)["status"]
           for r in read_records(OLD / "figures")}
    assert got == {("nntile_lab", 64): "ok", ("torch_fp32", 64): "out_of_memory",
                   ("nntile_lab", 128): "out_of_memory", ("torch_fp32", 128): "does_not_fit"}
    (torch,) = [r for r in read_records(OLD / "figures2")
                if r["options"]["system"] == "torch_fp32"]
    assert torch["status"] == "fits" and set(torch["results"]["modes"]) == {"eager",
                                                                             "compiled"}


@pytest.mark.parametrize("name", ["figures", "figures2"])
def test_old_figure_records_redraw_the_same_tables(tmp_path, name):
    """The engine's reader draws, from records the code before it wrote, byte for byte the
    figures' CSVs and the summary that code drew from them; the points table keeps every
    old column, value for value (beside the three it gained: ``nntile``, ``failed``,
    ``model``)."""
    import pandas as pd

    from nntile_lab.figures import redraw
    src = tmp_path / "src"
    shutil.copytree(OLD / name, src)
    redraw(src, tmp_path / "out")
    for want in sorted((OLD / f"{name}_drawn").iterdir()):
        got = tmp_path / "out" / want.name
        if want.name == "points.csv":
            old, new = pd.read_csv(want), pd.read_csv(got)
            assert set(new.columns) - set(old.columns) == {"nntile", "failed", "model"}
            pd.testing.assert_frame_equal(new[old.columns], old)
            continue
        assert got.read_bytes() == want.read_bytes(), want.name


def test_a_sweep_through_the_engine_measures_what_the_old_code_measured(tmp_path):
    """Same spec, same work: the numbers that do not depend on timing (tasks per step,
    workers, the static memory: parameters, gradients, optimizer state) equal the old
    records'. (The activations' peak depends on how the workers interleaved the tasks.)"""
    from nntile_lab import sweep
    old = {r["spec"]["vocab_tile"]: r for r in
           (read_record(p) for p in (OLD / "sweep_cache").glob("*.json"))
           if r["status"] == "fits"}
    specs = [ExperimentSpec.from_dict(r["spec"]) for r in old.values()]
    df = sweep.run(specs, tmp_path, peak_gflops=100.0, progress=False, keep_traces=False)
    for _, row in df.iterrows():
        was = old[row["vocab_tile"]]["results"]
        assert row["status"] == "fits"
        for k in ("tasks_per_step", "workers"):
            assert row[k] == was[k], k
        for cat, mb in was["memory_by_category"].items():
            if cat == "activations":
                continue
            assert row[f"mem_{cat.replace(' ', '_')}_mb"] == pytest.approx(mb), cat


def test_an_abort_in_starpus_shutdown_keeps_the_results_and_says_so(monkeypatch):
    """A device-capped figure point aborted in starpu_shutdown (StarPU 1.3) after measuring:
    its result was lost as a bare "killed by SIGABRT". The point writes what it measured
    before StarPU stops (engine.worker, nntile_lab.shutdown), and the record keeps it with
    where the process died."""
    rec = run_point(point("gemm_then_stop"))
    assert rec["status"] == "fits" and rec["reason"] is None
    assert rec["results"] == {"value": 64.0, "after_stop": True}      # the final outcome
    monkeypatch.setenv("NNTILE_LAB_POINT_FAULT", "abort-at-shutdown")
    rec = run_point(point("gemm_then_stop"))
    assert rec["status"] == "fits" and rec["results"] == {"value": 64.0}
    assert rec["reason"].startswith("StarPU aborted while shutting down, after the "
                                    "measurement (killed by SIGABRT")
    assert "the results were taken before it" in rec["reason"]


def test_a_sweep_point_aborted_in_starpus_shutdown_keeps_what_it_measured(monkeypatch):
    """The sweep's train-trace point takes its numbers once its trace stops, before its
    runtime does (ctx.finished): StarPU 1.3's abort in starpu_shutdown no longer loses them."""
    from nntile_lab.sweep.run import sweep_point
    monkeypatch.setenv("NNTILE_LAB_POINT_FAULT", "abort-at-shutdown")
    rec = run_point(sweep_point(replace(SPEC, measure_steps=1), peak_gflops=100.0))
    assert rec["status"] == "fits" and rec["reason"].startswith(
        "StarPU aborted while shutting down, after the measurement (killed by SIGABRT")
    got = rec["results"]
    assert got["measured_steps"] == 1 and got["gflops"] > 0 and got["tasks_per_step"] > 0
    assert got["mfu"] == pytest.approx(got["gflops"] / 100.0)
    assert 0 < got["point_wall_s"] < rec["wall_s"]
