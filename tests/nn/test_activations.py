"""The saved activations: what the model keeps is what the memory planner counts.

The planner sizes the records of ``nn.activations`` from their declared shapes; here
StarPU's own memory accounting (bytes allocated on RAM) measures what a forward
really keeps, over random shapes, tilings and precision modes (bf16 modes keep the
fields marked bf16 in 2 bytes), and every saved tensor's shape and dtype is checked
against its declaration."""
import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab import memory
from nntile_lab.nn.activations import Activations, Batch, BlockActivations, HeadActivations
from nntile_lab.nn.precision import MODES


@st.composite
def configs(draw):
    n_head = draw(st.integers(1, 4))
    head_size = draw(st.integers(1, 6))
    B, T = draw(st.integers(1, 4)), draw(st.integers(1, 12))
    cfg = nl.GPT2Config(
        n_layer=draw(st.integers(1, 3)), n_head=n_head, n_embd=n_head * head_size,
        n_positions=T + draw(st.integers(0, 3)), vocab_size=draw(st.integers(2, 60)),
        n_inner=draw(st.integers(1, 40)))
    tiles = {f: draw(st.one_of(st.none(), st.integers(1, dim))) for f, dim in (
        ("batch_tile", B), ("seq_tile", T), ("embd_tile", cfg.n_embd),
        ("inner_tile", cfg.n_inner), ("head_tile", n_head), ("vocab_tile", cfg.vocab_size))}
    return dataclasses.replace(cfg, **tiles), B, T


def _batch(cfg, B, T, seed=0):
    ids = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T + 1))
    return ids[:, :-1], ids[:, 1:]


@settings(max_examples=15, deadline=None)
@given(configs(), st.sampled_from(MODES))
def test_planner_counts_what_the_forward_keeps(case, precision):
    cfg, B, T = case
    # no buffer cache: a freed temporary's bytes go back to StarPU's accounting at once
    with nl.Runtime(ncpu=2, buffer_cache_mb=0, hints="none") as rt:
        model = nl.GPT2(cfg, seed=1, precision=precision)
        rt.wait()
        before = rt.memory_used(0)
        acts = model.forward(*_batch(cfg, B, T))
        rt.wait()
        kept = rt.memory_used(0) - before
        plan = memory.estimate(cfg, batch=B, seq_len=T, precision=precision)
        assert kept == plan.categories["activations"] == Activations.nbytes(
            cfg, B, T, precision), (kept, plan.categories["activations"])
        # the parameters: float32 masters, plus under bf16 the GEMM weights' bf16 copies
        n = cfg.num_params(with_positions=True)
        copies = sum(2 * math.prod(p.shape) for p in model.params16.values())
        assert plan.categories["parameters"] == 4 * n + copies
        assert copies == (2 * memory.gemm_weight_elements(cfg) if precision == "bf16" else 0)

        for record, kind in ((acts.batch, Batch), *((b, BlockActivations) for b in acts.blocks),
                             (acts.head, HeadActivations)):
            assert type(record) is kind
            for name, (shape, dtype) in kind.shapes(cfg, B, T, precision).items():
                t = getattr(record, name)
                assert (t.shape, t.dtype) == (shape, dtype), (kind.__name__, name)
        assert len(acts.blocks) == cfg.n_layer
        acts.free()
        rt.wait()
        assert rt.memory_used(0) == before
        model.free()


def test_a_step_frees_every_temporary_and_saved_tensor():
    """After a training step only the parameters and gradients stay allocated: the
    stages' arenas freed every temporary and every saved record, also with hints."""
    cfg = nl.GPT2Config(n_layer=2, n_head=4, n_embd=16, n_positions=8, vocab_size=50,
                        n_inner=24, batch_tile=1, seq_tile=3, embd_tile=8, inner_tile=10,
                        head_tile=2, vocab_tile=16)
    for hints, precision in (("none", "fp32"), ("all", "fp32"), ("none", "bf16"),
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
