"""What a training step keeps and frees, measured by StarPU's own memory accounting, equals
what the planner's dry run of the same code counts (``memory.categories``), over random
shapes, tilings, precision modes, GPT-2 and models composed by a user (a parallel block, a
post-norm block with an untied head); every saved record is its layer's typed ``Saved``;
and a whole step frees everything but the parameters and gradients."""
import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab import memory
from nntile_lab.nn.config import model_class
from nntile_lab.nn.policy import StepPolicy
from nntile_lab.nn.precision import MODES
from tests.nn.variants import VARIANTS


@st.composite
def configs(draw):
    """(model name, config, batch, seq_len, batch seed) of a small model, random tiles."""
    name = draw(st.sampled_from(sorted(VARIANTS)))
    n_head = draw(st.integers(1, 4))
    head_size = draw(st.integers(1, 6))
    B, T = draw(st.integers(1, 4)), draw(st.integers(1, 12))
    cfg = VARIANTS[name](
        n_layer=draw(st.integers(1, 3)), n_head=n_head, n_embd=n_head * head_size,
        n_positions=T + draw(st.integers(0, 3)), vocab_size=draw(st.integers(2, 60)),
        n_inner=draw(st.integers(1, 40)))
    tiles = {f: draw(st.one_of(st.none(), st.integers(1, dim))) for f, dim in (
        ("batch_tile", B), ("seq_tile", T), ("embd_tile", cfg.n_embd),
        ("inner_tile", cfg.n_inner), ("head_tile", n_head), ("vocab_tile", cfg.vocab_size))}
    return name, dataclasses.replace(cfg, **tiles), B, T, draw(st.integers(0, 2**31))


def _batch(cfg, B, T, seed=0):
    ids = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T + 1))
    return ids[:, :-1], ids[:, 1:]


@settings(max_examples=20, deadline=None)
@given(configs(), st.sampled_from(MODES))
def test_planner_counts_what_the_step_keeps(case, precision):
    check_planner_counts(*case, precision)


def check_planner_counts(name, cfg, B, T, seed, precision):
    """The planner's categories against StarPU's accounting of a step of model ``name``."""
    cats = memory.categories(cfg, B, T, precision=precision)
    # no buffer cache: a freed temporary's bytes go back to StarPU's accounting at once
    with nl.Runtime(ncpu=2, buffer_cache_mb=0, hints="none") as rt:
        model = model_class(name)(cfg, seed=1, precision=precision)
        step = StepPolicy(model, training=True)
        step.start_gradients(accumulate=False)
        rt.wait()
        before = rt.memory_used(0)
        assert before == cats["parameters"] + cats["gradients"]
        loss = model._forward(step, model.inputs(*_batch(cfg, B, T, seed)))
        rt.wait()
        assert rt.memory_used(0) - before == cats["activations"], (name, precision)
        for n in step.tape.nodes:   # each leaf's record is its own typed record
            if n.layer is not None:
                assert type(n.record) is type(n.layer).Saved
        step.backward()
        loss.storage.free()
        rt.wait()
        assert rt.memory_used(0) == before
        model.free()


def test_bf16_copies_are_the_gemm_weights():
    cfg = nl.GPT2Config(n_layer=2, n_head=2, n_embd=8, n_positions=8, vocab_size=30,
                        n_inner=12)
    E, F = cfg.n_embd, cfg.n_inner
    assert memory.gemm_weight_elements(cfg) == 30 * E + 2 * (4 * E * E + 2 * E * F)
    with nl.Runtime(ncpu=1):
        model = nl.GPT2(cfg, precision="bf16")
        assert sum(math.prod(p.shape) for p in model.params16.values()) == \
            memory.gemm_weight_elements(cfg)
        assert "transformer.wpe.weight" not in model.params16   # a lookup only
        model.free()


def test_a_step_frees_every_temporary_and_saved_tensor():
    """After a training step only the parameters and gradients stay allocated: the
    leaves' arenas freed every temporary and the tape every value, record and gradient,
    also with hints."""
    cfg = nl.GPT2Config(n_layer=2, n_head=4, n_embd=16, n_positions=8, vocab_size=50,
                        n_inner=24, batch_tile=1, seq_tile=3, embd_tile=8, inner_tile=10,
                        head_tile=2, vocab_tile=16)
    for hints, precision in (("none", "fp32"), ("all", "fp32"), ("all", "bf16"),
                             ("all", "bf16-storage")):
        with nl.Runtime(ncpu=2, buffer_cache_mb=0, hints=hints) as rt:
            model = nl.GPT2(cfg, precision=precision)
            params = 4 * cfg.num_params(with_positions=True)
            copies = 2 * memory.gemm_weight_elements(cfg) if precision == "bf16" else 0
            for accumulate in (False, True):
                model.forward_backward(*_batch(cfg, 3, 8), accumulate=accumulate)
                rt.wait()
                assert rt.memory_used(0) == 2 * params + copies, (hints, precision)
            model.loss(*_batch(cfg, 3, 8))
            rt.wait()
            assert rt.memory_used(0) == 2 * params + copies, (hints, precision)
            model.free()
