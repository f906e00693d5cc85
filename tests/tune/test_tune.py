"""``tune`` on a tiny model: it measures the best-predicted candidates, learns from their
traces, chooses a tiling, writes its record and figure; bad input is one clear error before
any point; an interrupted tune keeps its points and resumes from them at no cost."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nntile_lab.engine import read_record
from nntile_lab.errors import UsageError
from nntile_lab.interrupts import Interrupted
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.tune import tune
from nntile_lab.tune.predict import step_graph
from nntile_lab.tune.run import parse_budget
from tests.jupyter_kernel import REPO

TINY = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, vocab_size=512, seq_len=32, batch=4,
                      ncpu=2, warmup_steps=1, measure_steps=2)
AXES = {f: [getattr(TINY, f)] for f in TILE_FIELDS} | {"batch_tile": [1, 2, 4],
                                                       "vocab_tile": [128, 512]}
PEAK = 100.0


def test_budgets_are_durations():
    assert parse_budget("90s") == 90 and parse_budget("3m") == 180 and parse_budget(2) == 2
    assert parse_budget("1.5h") == 5400
    for bad in ("soon", "-3m", "0", "3 weeks"):
        with pytest.raises(UsageError, match="--budget"):
            parse_budget(bad)


def test_the_dry_run_graph_has_the_real_steps_tasks():
    """The predicted step's tasks are the real step's: the same count per codelet as a
    traced step of the same spec (forward, backward, norm, update)."""
    from collections import Counter

    from nntile_lab.trace import training
    spec = TINY.replace(batch_tile=2, vocab_tile=128)
    g = step_graph(spec)
    got = Counter(g.train.ops) + Counter(g.update.ops)
    tr, _, _ = training.run_for_trace(spec, 1, data="random", warmup_steps=0)
    want = Counter(tr.tasks["name"])
    assert got == want


def test_tune_chooses_records_and_resumes(tmp_path):
    res = tune(TINY, 120, axes=AXES, cache_dir=tmp_path / "store", out=tmp_path / "out",
               progress=False, peak_gflops=PEAK)
    t = res.table
    measured = t[t["measured_step_s"].notna()]
    assert res.best is not None and len(measured) >= 2
    assert res.gflops == pytest.approx(res.best.flops_per_step() / res.step_time_s / 1e9)
    # the chosen tiling is the best measured one, and its command line trains with it
    assert res.step_time_s == pytest.approx(measured["measured_step_s"].min())
    assert f"--batch-tile {res.best.batch_tile}" in res.command
    assert res.command.startswith("nntile-lab train --n-layer 1")
    # the first point measured is the best-predicted one; predictions after learning are
    # within a factor of the measurements (the scale is fitted)
    first = measured.sort_values("order").iloc[0]
    assert first["first_predicted_step_s"] == pytest.approx(
        t[t["status"] != "pruned"]["first_predicted_step_s"].min())
    rec = read_record(tmp_path / "out" / "tune.json")
    assert rec["kind"] == "tune" and rec["results"]["chosen"]["batch_tile"] == \
        res.best.batch_tile
    assert len(rec["results"]["candidates"]) == 6 and rec["results"]["codelets"]
    assert (tmp_path / "out" / "tune.png").read_bytes()[:4] == b"\x89PNG"
    # again: every measured point is read from the store, no budget spent on them
    again = tune(TINY, 120, axes=AXES, cache_dir=tmp_path / "store", progress=False,
                 peak_gflops=PEAK)
    cached = again.table[again.table["measured_step_s"].notna()]
    assert cached["cached"].astype(bool).sum() >= len(measured)


def test_an_interrupted_tune_keeps_its_points(tmp_path, monkeypatch):
    from nntile_lab.tune import run as run_mod
    calls = []
    real = run_mod._State.measure

    def measure_then_stop(self, spec, why):
        calls.append(spec)
        real(self, spec, why)
        raise KeyboardInterrupt
    monkeypatch.setattr(run_mod._State, "measure", measure_then_stop)
    with pytest.raises(Interrupted, match="tune stopped after 1 measured points; they are "
                                          "kept in .*: run the same tune again"):
        tune(TINY, 120, axes=AXES, cache_dir=tmp_path, progress=False, peak_gflops=PEAK)
    monkeypatch.undo()
    res = tune(TINY, 120, axes=AXES, cache_dir=tmp_path, progress=False, peak_gflops=PEAK)
    first = res.table[res.table["order"] == 1].iloc[0]
    assert bool(first["cached"]) and first["batch_tile"] == calls[0].batch_tile


def test_bad_input_is_one_clear_error_before_any_point(tmp_path):
    with pytest.raises(UsageError, match=r"too small to measure one point: the quickest "
                                         r"candidate .* takes about \d+ s"):
        tune(TINY, 0.5, axes=AXES, cache_dir=tmp_path, progress=False, peak_gflops=PEAK)
    with pytest.raises(UsageError, match="no tiling of the 6 candidates fits: cannot run "
                                         "under these memory settings"):
        tune(TINY.replace(n_embd=512, n_head=8, memory_limit_mb=16), 60,
             axes=AXES, cache_dir=tmp_path, progress=False, peak_gflops=PEAK)
    with pytest.raises(UsageError, match="nothing to tune"):
        tune(TINY, 60, axes={f: [getattr(TINY, f)] for f in TILE_FIELDS},
             cache_dir=tmp_path, progress=False, peak_gflops=PEAK)
    assert not list(tmp_path.glob("*.json"))          # nothing measured


@pytest.mark.parametrize("extra, message", [
    (["--budget", "1s"], "too small to measure one point"),
    (["--budget", "later"], "--budget 'later'"),
    (["--batch-tile", "4", "--vocab-tile", "512", "--inner-tile", "256", "--head-tile", "2",
      "--embd-tile", "64", "--seq-tile", "32"], "nothing to tune"),
    (["--memory-limit-mb", "16", "--n-embd", "512", "--n-head", "8"], "fits"),
])
def test_the_command_line_exits_2_with_one_line(tmp_path, extra, message):
    argv = ["tune", "--n-layer", "1", "--n-head", "2", "--n-embd", "64", "--vocab-size", "512",
            "--seq-len", "32", "--batch", "4", "--ncpu", "2", "--cache", str(tmp_path / "c"),
            "--out", str(tmp_path / "o"), "--no-progress"]
    # later options win (argparse): the bad ones come last
    res = subprocess.run([sys.executable, "-m", "nntile_lab.cli", *argv, *extra],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_the_command_line_tunes(tmp_path, capsys):
    from nntile_lab import cli
    argv = ["tune", "--n-layer", "1", "--n-head", "2", "--n-embd", "64", "--vocab-size", "512",
            "--seq-len", "32", "--batch", "4", "--ncpu", "2", "--measure-steps", "2",
            "--batch-tile", "1,2,4", "--vocab-tile", "128,512", "--inner-tile", "256",
            "--head-tile", "2", "--budget", "2m", "--cache", str(tmp_path / "c"),
            "--out", str(tmp_path / "o"), "--no-progress", "--json"]
    assert cli.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["best"]) == {"batch_tile", "vocab_tile"} and res["gflops"] > 0
    assert res["command"].startswith("nntile-lab train") and len(res["candidates"]) == 6
