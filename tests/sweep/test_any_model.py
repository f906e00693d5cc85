"""The studies take any model built from layers through the spec (issue 27 §5, issue 28 §3): a
sweep and a tune of a user-composed model (tests/nn/variants.py: a GPT-J-style parallel block)
and of the Llama, their points in their own processes, their steps predicted from their own
dry runs; bench train on them (a PyTorch peer for the Llama, none for a user's model)."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pandas as pd
import pytest

from nntile_lab import cli, sweep
from nntile_lab.bench import train as bench_train
from nntile_lab.engine import read_record
from nntile_lab.nn.config import MODELS, GPT2Config, register_model
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.trace import training
from nntile_lab.tune import tune
from nntile_lab.tune.predict import step_graph
from tests.nn import variants  # registers test-parallel and test-postnorm

SPEC = ExperimentSpec(model="test-parallel", n_layer=1, n_head=2, n_embd=64, vocab_size=512,
                      seq_len=32, batch=4, ncpu=2, warmup_steps=1, measure_steps=2)
# grouped-query heads (2 query heads a key/value head), MLP 256 by Llama's rule
LLAMA = SPEC.replace(model="llama", n_head=4, n_kv_head=2)
# the CLI's options of LLAMA
LLAMA_ARGS = ["--model", "llama", "--n-layer", "1", "--n-head", "4", "--n-kv-head", "2",
              "--n-embd", "64", "--vocab-size", "512", "--seq-len", "32", "--batch", "4",
              "--ncpu", "2", "--warmup-steps", "1", "--measure-steps", "2", "--no-progress"]


def test_a_sweep_of_a_composed_model_runs_its_points_in_their_own_processes(tmp_path):
    df = sweep.run(sweep.grid(SPEC, vocab_tile=[128, 512]), tmp_path, peak_gflops=100.0,
                   progress=False, keep_traces=False)
    assert list(df["status"]) == ["fits", "fits"] and (df["gflops"] > 0).all()
    assert set(df["model"]) == {"test-parallel"}
    # the FLOPs are the composed model's (its tree), not GPT-2's closed form
    assert SPEC.flops_per_step() == SPEC.model_config().flops_per_token(32) * 4 * 32


@pytest.mark.parametrize("base", [SPEC, LLAMA], ids=["test-parallel", "llama"])
def test_the_predicted_step_of_a_model_has_its_real_tasks(base):
    spec = base.replace(vocab_tile=128)
    g = step_graph(spec)
    tr, _, _ = training.run_for_trace(spec, 1, data="random", warmup_steps=0)
    assert Counter(g.train.ops) + Counter(g.update.ops) == Counter(tr.tasks["name"])


def test_tune_chooses_tiles_of_a_composed_model(tmp_path):
    axes = {f: [getattr(SPEC, f)] for f in TILE_FIELDS} | {"vocab_tile": [128, 512]}
    res = tune(SPEC, 90, axes=axes, cache_dir=tmp_path, progress=False, peak_gflops=100.0)
    assert res.best is not None and res.best.model == "test-parallel"
    assert "--model test-parallel" in res.command


def test_bench_train_measures_a_composed_model_and_refuses_a_torch_peer():
    res = bench_train.run(SPEC, vs_torch=False)
    assert res["nntile_gflops"] > 0 and res["spec"]["model"] == "test-parallel"
    assert bench_train.report(res).startswith("test-parallel L=1 E=64")
    with pytest.raises(ValueError, match="model 'test-parallel' has no PyTorch peer"):
        bench_train.run(SPEC, vs_torch=True)


def test_bench_train_measures_a_llama_against_pytorchs_llama():
    res = bench_train.run(LLAMA, vs_torch=True, torch_compile=False)
    assert res["spec"]["model"] == "llama" and res["config"]["n_kv_head"] == 2
    assert res["torch"]["eager"]["model"] == "torch_llama" and res["ratio"] > 0
    # both systems' GFLOP/s are the Llama's FLOPs over their step times
    assert res["flops_per_step"] == LLAMA.flops_per_step() != LLAMA.replace(
        model="gpt2", n_kv_head=None).flops_per_step()
    text = bench_train.report(res)
    assert text.startswith("Llama L=1 E=64 H=4") and "PyTorch Llama fp32 eager" in text


def test_the_sweep_command_sweeps_gpt2_and_the_llama_side_by_side(tmp_path, capsys):
    """``--model gpt2,llama``: the model is an axis like any field; each point measures its
    own model (its FLOPs, its tasks)."""
    i = LLAMA_ARGS.index("--n-kv-head")   # GPT-2 has no key/value heads of its own
    args = ["--model", "gpt2,llama"] + LLAMA_ARGS[2:i] + LLAMA_ARGS[i + 2:]
    assert cli.main(["sweep", *args, "--vocab-tile", "128", "--cache", str(tmp_path / "c"),
                     "--out", str(tmp_path / "o")]) == 0
    df = pd.read_csv(tmp_path / "o" / "sweep.csv")
    assert sorted(df["model"]) == ["gpt2", "llama"] and (df["status"] == "fits").all()
    for _, r in df.iterrows():
        spec = LLAMA.replace(model=r["model"], n_kv_head=None, vocab_tile=128)
        # the fastest step's rate: its own model's FLOPs over its time
        assert r["gflops_max"] * r["step_time_min_s"] * 1e9 == pytest.approx(
            spec.flops_per_step())
    rec = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert "llama" in json.dumps(rec)


def test_the_tune_command_tunes_a_llama(tmp_path, capsys):
    argv = ["tune", *LLAMA_ARGS, "--batch-tile", "4", "--head-tile", "2",
            "--vocab-tile", "128,512", "--inner-tile", "128,256", "--budget", "2m",
            "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "o"), "--json"]
    assert cli.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["candidates"]) == 4 and set(res["best"]) == {"vocab_tile", "inner_tile"}
    assert all(c["predicted_step_s"] > 0 for c in res["candidates"])
    assert res["gflops"] > 0 and read_record(tmp_path / "o" / "tune.json")["spec"]["model"] \
        == "llama"
    assert "--model llama" in res["command"] and "--n-kv-head 2" in res["command"]


def test_a_model_defined_in_a_notebook_is_measured_in_the_notebooks_process(tmp_path,
                                                                            monkeypatch):
    """A class a notebook's cell defines (module ``__main__``) is known in that process only:
    sweep and tune say so before any point, and measure it in-process (isolate=False)."""
    @dataclass
    class NotebookConfig(GPT2Config):
        pass

    class NotebookGPT(variants.ParallelGPT):
        config_class = NotebookConfig
    NotebookConfig.__module__ = NotebookGPT.__module__ = "__main__"   # as a cell defines them
    monkeypatch.setitem(MODELS, "test-notebook", (NotebookConfig, None))   # gone after the test
    register_model("test-notebook", NotebookGPT)
    spec = SPEC.replace(model="test-notebook")
    only_here = r"model 'test-notebook' \(.*NotebookGPT\) is defined in this notebook"
    with pytest.raises(ValueError, match=only_here):
        sweep.run([spec], tmp_path, progress=False, peak_gflops=100.0)
    axes = {f: [getattr(SPEC, f)] for f in TILE_FIELDS} | {"vocab_tile": [128, 512]}
    with pytest.raises(ValueError, match=only_here):
        tune(spec, 60, axes=axes, cache_dir=tmp_path, progress=False, peak_gflops=100.0)
    assert not list(tmp_path.glob("*.json"))          # nothing measured
    df = sweep.run([spec], tmp_path, isolate=False, progress=False, peak_gflops=100.0,
                   keep_traces=False)
    assert list(df["status"]) == ["fits"] and df.loc[0, "gflops"] > 0
