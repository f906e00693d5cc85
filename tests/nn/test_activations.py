"""What a training step's forward keeps, measured by StarPU's own memory accounting: the
saved records of the layers (typed: each leaf's ``Saved``) and nothing else, over random
shapes, tilings and precision modes; every stage's records hold what the planner's
declaration of a block (``nn.activations``) says, field for field; and a whole step frees
everything but the parameters and gradients."""
import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab import memory
from nntile_lab.nn.activations import BlockActivations, HeadActivations
from nntile_lab.nn.policy import StepPolicy
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
    return dataclasses.replace(cfg, **tiles), B, T, draw(st.integers(0, 2**31))


def _batch(cfg, B, T, seed=0):
    ids = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T + 1))
    return ids[:, :-1], ids[:, 1:]


def _nbytes(t) -> int:
    return math.prod(t.shape) * t.dtype.itemsize


@settings(max_examples=15, deadline=None)
@given(configs(), st.sampled_from(MODES))
def test_the_forward_keeps_its_records_and_nothing_else(case, precision):
    cfg, B, T, seed = case
    # no buffer cache: a freed temporary's bytes go back to StarPU's accounting at once
    with nl.Runtime(ncpu=2, buffer_cache_mb=0, hints="none") as rt:
        model = nl.GPT2(cfg, seed=1, precision=precision)
        step = StepPolicy(model, training=True)
        step.start_gradients(accumulate=False)
        rt.wait()
        before = rt.memory_used(0)
        loss = model._forward(step, model.inputs(*_batch(cfg, B, T, seed)))
        rt.wait()
        kept = rt.memory_used(0) - before
        nodes = step.tape.nodes
        records = [n.record for n in nodes if n.record is not None]
        held = {id(t.storage): t for r in records for t in r.tensors()}
        # what StarPU holds: every record's tensors (a tensor two records share, once), the
        # loss, and nothing else — no temporary, no intermediate value
        assert kept == sum(_nbytes(t) for t in held.values()) + 4, (kept, precision)
        # by stage: the planner's declared block record is the union of a block's records
        for i in range(cfg.n_layer):
            stage = [n.record for n in nodes if n.layer is not None
                     and n.region.module is model.transformer.h[i]]
            want = BlockActivations.shapes(cfg, B, T, precision)
            got = sorted((t.shape, str(t.dtype)) for r in stage for t in r.tensors())
            assert got == sorted((s, str(d)) for s, d in want.values()), (i, got)
        # the head: ln_f's (x, mean, inv_std) and the head's kept input, as declared, plus
        # the logits' gradient (made with the loss)
        head = [n for n in nodes if n.region.layer == cfg.n_layer and n.layer is not None]
        got = sorted((t.shape, str(t.dtype)) for n in head for t in n.record.tensors())
        want = HeadActivations.shapes(cfg, B, T, precision)
        dlogits = head[-1].record.dlogits
        assert dlogits.shape == (B, T, cfg.vocab_size)
        assert got == sorted([*((s, str(d)) for s, d in want.values()),
                              (dlogits.shape, str(dlogits.dtype))])
        for n in nodes:   # each leaf's record is its own typed record
            if n.layer is not None:
                assert type(n.record) is type(n.layer).Saved
        step.backward()
        loss.storage.free()
        rt.wait()
        params = 4 * cfg.num_params(with_positions=True)
        copies = sum(2 * math.prod(p.shape) for p in model.params16.values())
        assert copies == (2 * memory.gemm_weight_elements(cfg) if precision == "bf16" else 0)
        assert rt.memory_used(0) == before == 2 * params + copies
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
