"""The dry run (``nn.meta``) against a real step: the same tasks per op and the same FLOPs
per op as the trace records, with the same (layer, phase, priority) tags, over random
shapes, tilings, precisions, hint sets and models (GPT-2 and user compositions); an op
without a dry-run rule is one clear error."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab.nn import backend
from nntile_lab.nn.config import model_class
from nntile_lab.nn.meta import dry_run
from nntile_lab.nn.precision import MODES
from nntile_lab.trace import Trace
from tests.nn.test_activations import configs


@settings(max_examples=12, deadline=None)
@given(configs(), st.sampled_from(MODES), st.sampled_from(["none", "all"]))
def test_dry_run_submits_what_a_step_submits(case, precision, hints):
    check_dry_run(*case, precision, hints)


def check_dry_run(name, cfg, B, T, seed, precision, hints):
    """The dry run's tasks, FLOPs and tags against the trace of a real step."""
    ids = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T + 1))
    x, y = ids[:, :-1], ids[:, 1:]
    with dry_run(hints=nl.spec.parse_hints(hints)) as dry:
        model_class(name)(cfg, seed=1, precision=precision).forward_backward(x, y)
    with nl.Runtime(ncpu=2, hints=hints, profiling=True) as rt:
        model = model_class(name)(cfg, seed=1, precision=precision)
        rt.wait()
        tr = Trace(rt).start()
        model.forward_backward(x, y)
        rt.wait()
        tr.stop()
        model.free()
    real = tr.tasks
    assert dict(dry.counts(since="begin")) == real["name"].value_counts().to_dict()
    flops = real.groupby("name")["flops"].sum().to_dict()
    for op, f in dry.flops(since="begin").items():
        assert f == pytest.approx(flops[op], rel=1e-6), op
    got = sorted((t.op, t.layer, t.phase, t.priority) for t in dry.tasks_since("begin"))
    want = sorted(zip(real["name"], real["layer"], real["phase"], real["priority"]))
    assert got == want


def test_an_op_without_a_rule_is_named():
    with dry_run(), pytest.raises(NotImplementedError, match="no rule for ops.sumsq_all"):
        backend.ops.sumsq_all()


def test_dry_run_needs_no_runtime():
    """No StarPU: the planner's view of the main job, built and stepped in a dry run."""
    cfg = dataclasses.replace(nl.GPT2Config(), batch_tile=4, vocab_tile=8192, inner_tile=512,
                              head_tile=2)
    with dry_run() as dry:
        ids = np.zeros((8, 128), np.int64)
        nl.GPT2(cfg).forward_backward(ids, ids)
    assert nl.Runtime.active is None
    counts = dry.counts(since="begin")
    assert counts["cross_entropy_backward"] == 7 * 2   # ⌈V/8192⌉ × two token tiles
    assert dry.alive_at("backward") == dry.alive_at("step") + 4   # all freed but the loss
