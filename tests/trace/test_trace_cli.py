"""``nntile-lab trace`` and ``nntile-lab peak`` with a stand-in training run."""
import argparse
import json
import os

import pandas as pd
import pytest

from nntile_lab import sgemm_peak
from nntile_lab.cli import main as nntile_lab_main
from nntile_lab.engine import read_record
from nntile_lab.trace import cli, training
from tests.trace.conftest import traced_gpt2


def parse(argv):
    parser = argparse.ArgumentParser(prog="nntile-lab")
    cli.register_cli(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


@pytest.fixture
def fake_peak(monkeypatch, tmp_path):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path / "cache"))
    calls = []

    def measure():
        calls.append(1)
        return {"gflops": 100.0, "method": "test", "blas_threads": 2, "measured": "now"}
    monkeypatch.setattr(sgemm_peak, "measure", measure)
    return calls


@pytest.mark.slow
def test_trace_command_writes_every_file(tmp_path, monkeypatch, capsys, fake_peak):
    seen = {}

    def run_for_trace(spec, steps, data, warmup_steps, profiling, bound=False):
        seen.update(n_layer=spec.n_layer, vocab_tile=spec.vocab_tile, steps=steps, data=data,
                    warmup_steps=warmup_steps, profiling=profiling)
        return traced_gpt2(steps=steps)
    monkeypatch.setattr(training, "run_for_trace", run_for_trace)
    out = tmp_path / "out"
    args = parse(["trace", "--out", str(out), "--steps", "2", "--", "--n-layer", "1",
                  "--vocab-size", "100", "--data", "d", "--warmup-steps", "2"])
    assert args.func(args) == 0
    assert seen == {"n_layer": 1, "vocab_tile": 100, "steps": 2, "data": "d",
                    "warmup_steps": 2, "profiling": True}
    # without --steps: the spec's measure_steps (its one default)
    other = str(tmp_path / "other")
    assert parse(["trace", "--out", other]).steps is None
    assert args.func(parse(["trace", "--out", other, "--", "--measure-steps", "3"])) == 0
    assert seen["steps"] == 3 and seen["warmup_steps"] == 1
    files = set(os.listdir(out))
    assert {"tasks.csv", "trace.json", "summary.json", "gantt.png", "gantt_step.png",
            "utilisation.png", "memory.png", "transfers.png", "op_time.png",
            "throughput.png"} <= files
    tasks = pd.read_csv(out / "tasks.csv")
    assert {"name", "worker", "submit_us", "start_us", "end_us", "flops", "layer",
            "phase"} <= set(tasks.columns)
    with open(out / "trace.json") as f:
        assert sum(e["ph"] == "X" for e in json.load(f)["traceEvents"]) == len(tasks)
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["tasks"] == len(tasks) and summary["peak_gflops"] == 100.0
    rec = read_record(out / "run.json")
    assert rec["kind"] == "trace" and rec["spec"]["n_layer"] == 1 and rec["steps"] == 2
    assert rec["results"]["tasks"] == len(tasks) and rec["machine"]["cores"]
    assert summary["mfu"] == pytest.approx(summary["gflops"] / 100.0)
    assert summary["tokens_per_step"] == 16 and summary["tokens"] == 32
    assert set(summary["memory_by_category"]) == {"parameters", "gradients", "optimizer state",
                                                  "activations"}
    printed = capsys.readouterr().out
    assert "MFU" in printed and "critical path" in printed and "trace.json" in printed


def test_trace_command_bad_options_are_clear_errors(tmp_path, capsys):
    args = parse(["trace", "--out", str(tmp_path), "--no-peak", "--", "--vocab-size", "10",
                  "--vocab-tile", "20"])
    with pytest.raises(ValueError, match="vocab_tile=20 .*--vocab-tile.* 1 to vocab_size=10"):
        args.func(args)
    assert nntile_lab_main(["trace", "--out", str(tmp_path), "--steps", "0"]) == 2   # a usage error
    err = capsys.readouterr().err
    assert "--steps" in err and "0 is out of range" in err


def test_peak_is_measured_once_and_cached(fake_peak, capsys):
    assert sgemm_peak.gflops() == 100.0 and sgemm_peak.gflops() == 100.0
    assert len(fake_peak) == 1
    with open(sgemm_peak.cache_path()) as f:
        assert list(json.load(f)) == [sgemm_peak.machine_key()]
    args = parse(["peak", "--refresh", "--json"])
    assert args.func(args) == 0
    assert len(fake_peak) == 2
    assert json.loads(capsys.readouterr().out)["gflops"] == 100.0


def test_peak_measurement_is_a_rate():
    res = sgemm_peak.measure(n=256, trials=2, rounds=2, pause_s=0.01)
    assert res["gflops"] > 0.1 and "N=256" in res["method"]
    assert res["gflops"] >= res["median_gflops"]


def test_tracing_overhead_benchmark_builds_from_a_spec():
    """``python -m nntile_lab.trace.overhead``: its models are ExperimentSpecs (``--big`` is
    the main job's, the spec defaults), built as the trainer builds them."""
    from nntile_lab.spec import DEFAULTS, ExperimentSpec
    from nntile_lab.trace import overhead
    assert overhead.BIG == DEFAULTS
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                          ncpu=1, scheduler="eager")
    res = overhead.measure(spec, repeats=2, steps=1)
    assert res["spec"] == spec.to_dict() and res["workers"] == 1
    assert res["scheduler"] == "eager" and res["tasks_per_step"] > 10
    assert len(res["plain_runs_s"]) == len(res["traced_runs_s"]) == 2
    assert res["step_s_plain"] > 0 and res["overhead"] > -1
