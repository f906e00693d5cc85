"""The studies take any model built from layers through the spec (issue 27 §5): a sweep and a
tune of a user-composed model (tests/nn/variants.py: a GPT-J-style parallel block), its
points in their own processes, its step predicted from its own dry run; bench train on it."""
from __future__ import annotations

from collections import Counter

import pytest

import tests.nn.variants  # noqa: F401  (registers test-parallel and test-postnorm)
from nntile_lab import sweep
from nntile_lab.bench import train as bench_train
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.trace import training
from nntile_lab.tune import tune
from nntile_lab.tune.predict import step_graph

SPEC = ExperimentSpec(model="test-parallel", n_layer=1, n_head=2, n_embd=64, vocab_size=512,
                      seq_len=32, batch=4, ncpu=2, warmup_steps=1, measure_steps=2)


def test_a_sweep_of_a_composed_model_runs_its_points_in_their_own_processes(tmp_path):
    df = sweep.run(sweep.grid(SPEC, vocab_tile=[128, 512]), tmp_path, peak_gflops=100.0,
                   progress=False, keep_traces=False)
    assert list(df["status"]) == ["fits", "fits"] and (df["gflops"] > 0).all()
    assert set(df["model"]) == {"test-parallel"}
    # the FLOPs are the composed model's (its tree), not GPT-2's closed form
    assert SPEC.flops_per_step() == SPEC.model_config().flops_per_token(32) * 4 * 32


def test_the_predicted_step_of_a_composed_model_has_its_real_tasks():
    spec = SPEC.replace(vocab_tile=128)
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
