"""Sweeps with tiny models: rows and their numbers, the cache (resume, corrupt and
outdated files), failing points (bad tiles, unknown scheduler, a crashing process),
in-process mode and ``nntile-lab sweep``."""
import json
import os
import sys
import time

import numpy as np
import pytest

from nntile_lab import cli, sgemm_peak, sweep
from nntile_lab.engine import read_record
from nntile_lab.memory import MemoryPlanError
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep.run import sweep_point
from nntile_lab.trace import Trace, training

BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=3, ncpu=2)
PEAK = 100.0


def test_grid_is_the_product_and_keeps_bad_points():
    pts = sweep.grid(BASE, vocab_tile=[16, 64, 65, 0], scheduler=["lws", "eager"])
    assert len(pts) == 8
    assert [(p.vocab_tile, p.scheduler) for p in pts[:4]] == [
        (16, "lws"), (16, "eager"), (64, "lws"), (64, "eager")]
    bad = pts[4:]
    assert all(isinstance(p, sweep.InvalidSpec) for p in bad)
    assert "vocab_tile=65 (--vocab-tile) must be from 1 to vocab_size=64" in bad[0].error
    assert "vocab_tile=0" in bad[2].error and bad[2].values["scheduler"] == "lws"
    with pytest.raises(ValueError, match=r"unknown sweep axis \['vocab_tiles'\]"):
        sweep.grid(BASE, vocab_tiles=[1])
    assert sweep.parse_axes({"batch_tile": "1:5:2", "seq_tile": "4,none",
                             "scheduler": "lws, dmda"}) == {
        "batch_tile": [1, 3, 5], "seq_tile": [4, None], "scheduler": ["lws", "dmda"]}
    with pytest.raises(ValueError, match="--vocab-tile 'x': not a valid int"):
        sweep.parse_axes({"vocab_tile": "x"})


def check_numbers(row, spec):
    """The row's numbers agree with each other and with the spec's FLOP count."""
    assert row["error"] is None
    assert row["gflops"] == pytest.approx(spec.flops_per_step() / row["step_time_s"] / 1e9)
    assert row["tokens_per_s"] == pytest.approx(spec.tokens_per_step() / row["step_time_s"])
    assert row["mfu"] == pytest.approx(row["gflops"] / PEAK)
    assert row["gflops_min"] <= row["gflops"] <= row["gflops_max"]
    assert row["step_time_min_s"] <= row["step_time_s"] <= row["step_time_max_s"]
    assert 0 < row["utilisation"] <= 1 and 0 <= row["idle_share"] < 1
    assert 0 < row["critical_path_s"] <= row["makespan_s"] * (1 + 1e-9)
    assert row["makespan_s"] <= row["step_time_max_s"]
    assert 50 < row["peak_rss_mb"] < 4096 and row["starpu_peak_mb"] > 0
    params_mb = spec.gpt2_config().num_params(with_positions=True) * 4 / 2**20
    assert row["mem_parameters_mb"] == pytest.approx(params_mb)
    assert row["workers"] == 2 and row["tasks_per_step"] > 10


def test_sweep_rows_cache_and_failures(tmp_path):
    pts = sweep.grid(BASE, vocab_tile=[32, 64, 65], scheduler=["lws", "nosuch"])
    seen = []
    df = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False, on_point=seen.append)
    assert len(df) == len(seen) == 6
    assert list(df["error"].isna()) == [True, False, True, False, False, False]
    assert df.loc[1, "error"].startswith("unknown scheduler 'nosuch'; valid ones: ")
    assert "lws" in df.loc[1, "error"]
    assert "vocab_tile=65" in df.loc[4, "error"] and np.isnan(df.loc[4, "gflops"])
    assert list(df["status"]) == ["fits", "error", "fits", "error", "error", "error"]
    for i, vt in ((0, 32), (2, 64)):
        spec = BASE.replace(vocab_tile=vt)
        check_numbers(df.loc[i], spec)
        key = sweep_point(spec).key()
        assert df.loc[i, "key"] == key and not df.loc[i, "cached"]
        tr = Trace.load(df.loc[i, "trace_dir"])   # the point kept its trace
        assert len(tr.steps) == BASE.measure_steps and len(tr.tasks) > 0
        rec = read_record(tmp_path / f"{key}.json")
        assert rec["spec"] == spec.to_dict() and rec["code_version"] == sweep.code_version()
        assert rec["kind"] == "sweep-point" and rec["measure"] == "train-trace"
        assert rec["status"] == "fits" and rec["ran"] and rec["cpu_variant"]
        assert rec["results"]["gflops"] == df.loc[i, "gflops"] and rec["machine"]["cores"]
    # the same sweep again: every measured point from the cache, instantly
    t0 = time.perf_counter()
    again = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False)
    assert time.perf_counter() - t0 < 2
    assert list(again["cached"]) == [True, False, True, False, False, False]
    assert list(again["gflops"][[0, 2]]) == list(df["gflops"][[0, 2]])


def test_interrupted_sweep_resumes(tmp_path):
    pts = sweep.grid(BASE, batch_tile=[1, 2])

    def interrupt(row):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False, on_point=interrupt)
    df = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False)
    assert list(df["cached"]) == [True, False] and df["error"].isna().all()


def test_corrupt_and_outdated_cache_files_rerun_with_a_message(tmp_path):
    pts = sweep.grid(BASE, vocab_tile=[32, 64, 16])
    sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False, keep_traces=False,
              isolate=False)
    paths = [tmp_path / f"{sweep_point(p).key()}.json" for p in pts]
    paths[0].write_text('{"schema": 2, "kind": "sweep-po')            # torn/corrupt
    rec = json.loads(paths[1].read_text())
    paths[1].write_text(json.dumps({"format": 0} | {k: v for k, v in rec.items()
                                                    if k != "schema"}))  # an unknown form
    paths[2].write_text(json.dumps(rec | {"code_version": "0" * 16}))  # older code
    df = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False, keep_traces=False,
                   isolate=False)
    assert not df["cached"].any() and df["error"].isna().all()
    m = df.attrs["messages"]
    assert len(m) == 3
    assert "is corrupt" in m[0] and paths[0].name in m[0] and "runs again" in m[0]
    assert "format 0" in m[1] and "older version" in m[1]
    assert "code version 0000000000000000" in m[2]
    assert all(read_record(p)["code_version"] == sweep.code_version() for p in paths)


def test_a_crashing_point_is_a_row_and_the_sweep_goes_on(tmp_path, monkeypatch):
    pts = sweep.grid(BASE, vocab_tile=[32])
    monkeypatch.setenv("NNTILE_LAB_POINT_FAULT", "abort")
    df = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False)
    assert "the point's process died: killed by SIGABRT" in df.loc[0, "error"]
    assert df.loc[0, "status"] == "error"
    monkeypatch.delenv("NNTILE_LAB_POINT_FAULT")
    assert sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False)["cached"].all()
    df = sweep.run(pts, tmp_path, peak_gflops=PEAK, progress=False, retry_errors=True)
    assert df.loc[0, "error"] is None and df.loc[0, "gflops"] > 0


def test_a_model_that_does_not_fit_is_a_row(tmp_path, monkeypatch):
    """The memory planner's verdict (nntile_lab.memory.check) stops a point before it
    starts a process; the other points run."""
    def check(spec):
        if spec.n_embd > 16:
            raise MemoryPlanError(f"n_embd={spec.n_embd}: needs 9 GiB, the cap is 1 GiB")
    monkeypatch.setattr(sys.modules["nntile_lab.sweep.run"], "memory_check", check)
    df = sweep.run(sweep.grid(BASE, n_embd=[16, 32]), tmp_path, isolate=False,
                   peak_gflops=PEAK, progress=False, keep_traces=False)
    assert df.loc[0, "error"] is None and df.loc[0, "gflops"] > 0
    assert df.loc[1, "error"] == "n_embd=32: needs 9 GiB, the cap is 1 GiB"
    assert df.loc[1, "status"] == "oom"


def test_in_process_points(tmp_path, monkeypatch):
    spec = BASE.replace(vocab_tile=32, scheduler="eager")
    df = sweep.run([spec], tmp_path, isolate=False, peak_gflops=PEAK, progress=False)
    check_numbers(df.loc[0], spec)
    assert df.loc[0, "peak_rss_mb"] > 50

    def fail(*a, **k):
        raise RuntimeError("starpu_init failed")
    monkeypatch.setattr(training, "run_for_trace", fail)
    df = sweep.run([spec.replace(seed=1)], tmp_path, isolate=False, peak_gflops=PEAK,
                   progress=False)
    assert df.loc[0, "error"] == "RuntimeError: starpu_init failed"


def test_sweep_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sgemm_peak, "measure", lambda: {"gflops": PEAK, "method": "test",
                                                        "blas_threads": 2, "measured": "now"})
    argv = ["sweep", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--vocab-size", "64",
            "--seq-len", "8", "--batch", "2", "--ncpu", "2", "--measure-steps", "3",
            "--vocab-tile", "32,64,0", "--scheduler", "lws", "--no-progress"]
    assert cli.main([*argv, "--json", "--out", str(tmp_path / "out")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["axes"] == ["vocab_tile"] and len(res["points"]) == 3
    assert res["best"]["vocab_tile"] in (32, 64) and res["best"]["gflops"] > 0
    assert "vocab_tile=0 (--vocab-tile)" in res["points"][2]["error"]
    assert {os.path.basename(f) for f in res["files"].values()} == {
        "sweep.csv", "sweep.png", "sweep.json"}
    rec = read_record(tmp_path / "out" / "sweep.json")
    assert rec["kind"] == "sweep" and len(rec["results"]["points"]) == 3
    # again, as a table: from the cache
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["vocab_tile", "gflops"]
    assert "best: vocab_tile=" in out
    # nothing runnable: exit 1, the reason in the table
    assert cli.main([*argv[:-3], "--scheduler", "nosuch", "--no-progress"]) == 1
    assert "unknown scheduler 'nosuch'" in capsys.readouterr().out


def test_sweep_command_bad_input_is_said_and_the_rest_runs(tmp_path, monkeypatch, capsys):
    """Issue 9 item 7 from the shell: a tile larger than its dimension or zero, an unknown
    scheduler, a model that does not fit, a corrupt cache file and one from an older
    version each give a clear message (a row's error, or stderr) and the rest runs."""
    cache = tmp_path / "cache"
    argv = ["sweep", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--vocab-size", "64",
            "--seq-len", "8", "--batch", "2", "--ncpu", "2", "--measure-steps", "2",
            "--in-process", "--no-progress", "--cache", str(cache)]

    def sweep_json(*extra):
        assert cli.main([*argv, *extra, "--json"]) == 0
        out, err = capsys.readouterr()
        return json.loads(out)["points"], err
    pts, _ = sweep_json("--vocab-tile", "32,65,0", "--scheduler", "lws,nosuch")
    errors = [p["error"] for p in pts]
    assert errors[0] is None and pts[0]["gflops"] > 0
    assert errors[1].startswith("unknown scheduler 'nosuch'; valid ones: ")
    assert "vocab_tile=65 (--vocab-tile) must be from 1 to vocab_size=64" in errors[2]
    assert "vocab_tile=0 (--vocab-tile) must be from 1 to vocab_size=64" in errors[4]
    assert errors[3] == errors[2] and errors[5] == errors[4]
    path = cache / f"{pts[0]['key']}.json"
    path.write_text(path.read_text()[:40])                       # a torn/corrupt file
    pts, err = sweep_json("--vocab-tile", "32")
    assert f"nntile-lab sweep: record {path} is corrupt" in err and "runs again" in err
    assert not pts[0]["cached"] and pts[0]["gflops"] > 0
    path.write_text(path.read_text().replace('"schema": 2', '"schema": 3'))
    pts, err = sweep_json("--vocab-tile", "32")                 # from a newer version
    assert f"record {path} has schema 3" in err and "newer version" in err
    assert not pts[0]["cached"] and pts[0]["gflops"] > 0
    pts, _ = sweep_json("--vocab-tile", "32", "--n-embd", "512", "--memory-limit-mb", "none,16")
    assert pts[0]["error"] is None and pts[0]["gflops"] > 0
    assert pts[1]["error"].startswith("cannot run under these memory settings: the step needs")
    # the table names each failure beside its point
    assert cli.main([*argv, "--vocab-tile", "32,65"]) == 0
    out = capsys.readouterr().out
    assert "vocab_tile=65 (--vocab-tile) must be from 1 to vocab_size=64" in out.splitlines()[2]


def test_a_hint_set_is_one_value_and_sets_are_separated_by_a_slash():
    """--hints invalidate,wont_use was split into an axis of two single-hint points."""
    assert sweep.parse_axes({"hints": "invalidate,wont_use"}) == {
        "hints": ["invalidate,wont_use"]}
    assert sweep.parse_axes({"hints": "none/invalidate,wont_use/all",
                             "inner_tile": "256,512"}) == {
        "hints": [None, "invalidate,wont_use", "all"], "inner_tile": [256, 512]}
    points = sweep.grid(ExperimentSpec(), hints=["invalidate,wont_use"])
    assert [p.hints for p in points] == ["invalidate,wont_use"]
