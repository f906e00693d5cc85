"""GPT-2 under the bf16 precision modes against PyTorch's bf16 autocast, float64 and fp32.

Tolerances in units of bf16's rounding, u = 2⁻⁸ (round to nearest with 8 significant
bits: a value moves by at most u of itself). A step rounds every GEMM operand once (bf16)
or every saved activation once (bf16-storage); the gradients of a small GPT-2 then carry
a norm-wise error of about 1.5u against float64 for ``bf16`` and PyTorch's autocast alike,
0.5u for ``bf16-storage`` (docs/precision.md has the measured table). The bounds below
allow 2–4× that; a wrong term (a missing transpose, a stale weight copy) moves a gradient
by O(1), hundreds of u. The lower bounds catch the opposite bug: a mode that silently
computes in float32 errs by ~1e-7 (u/10⁴), below them.
"""
import dataclasses

import ml_dtypes
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.optim import AdamW
from nntile_lab.trace import Trace
from tests.conftest import require
from tests.tolerance import rel_err

torch = require("torch")
from nntile_lab.reference.torch_gpt2 import TorchGPT2  # noqa: E402

U = 2.0**-8
BASE = nl.GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=16, vocab_size=97,
                     n_inner=128)
TILINGS = {
    "leftovers": dict(batch_tile=2, seq_tile=5, embd_tile=24, inner_tile=48, head_tile=3,
                      vocab_tile=30),
    "whole": {},
}


def batch(cfg, B=3, T=13, seed=0):
    ids = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, T + 1))
    return ids[:, :-1], ids[:, 1:]


def torch_grads(cfg, state, ids, labels, *, autocast: bool):
    """Loss and gradients of the PyTorch GPT-2: float32 under bf16 autocast, or float64."""
    ref = TorchGPT2(cfg, dtype=torch.float32 if autocast else torch.float64)
    ref.load_numpy_state_dict(state)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = ref.forward_backward(ids, labels)
    return loss, ref.numpy_grad_state_dict()


def run(cfg, precision, ids, labels, seed=1):
    model = nl.GPT2(cfg, seed=seed, precision=precision)
    state = model.state_dict()
    loss = model.forward_backward(ids, labels)
    grads = model.grad_state_dict()
    model.free()
    return state, loss, grads


@pytest.mark.parametrize("tiling", TILINGS)
def test_bf16_matches_torch_autocast(rt1, tiling):
    cfg = dataclasses.replace(BASE, **TILINGS[tiling])
    ids, labels = batch(cfg)
    state, loss, grads = run(cfg, "bf16", ids, labels)
    ac_loss, ac_grads = torch_grads(cfg, state, ids, labels, autocast=True)
    exact_loss, exact = torch_grads(cfg, state, ids, labels, autocast=False)
    assert abs(loss - ac_loss) <= U / 2 * ac_loss and abs(loss - exact_loss) <= U / 2 * exact_loss
    for name, g in grads.items():
        # autocast rounds the same GEMM operands (and also the GEMM outputs): two bf16
        # computations, each a few u from float64, so within twice that of each other
        assert rel_err(g, ac_grads[name]) <= 6 * U, name
        assert rel_err(g, exact[name]) <= 4 * U, name
    # in bf16 for real: the matrices' gradients carry bf16's error, not float32's
    assert max(rel_err(grads[n], exact[n]) for n in grads if grads[n].ndim == 2) >= U / 8


@pytest.mark.parametrize("tiling", TILINGS)
def test_bf16_storage_matches_fp32(rt1, tiling):
    cfg = dataclasses.replace(BASE, **TILINGS[tiling])
    ids, labels = batch(cfg, seed=1)
    state, loss, grads = run(cfg, "bf16-storage", ids, labels)
    _, loss32, grads32 = run(cfg, "fp32", ids, labels)
    exact_loss, exact = torch_grads(cfg, state, ids, labels, autocast=False)
    # the forward computes in float32; only the head reads ln_f's output as saved (bf16)
    # and, n_embd in one tile ("whole"), the loss reads the logits rounded to bf16: the
    # loss moves by far less than u (measured 3e-7 and 2e-5 of it)
    assert abs(loss - loss32) <= U / 32 * loss32 and abs(loss - exact_loss) <= U / 32 * exact_loss
    for name, g in grads.items():
        assert rel_err(g, grads32[name]) <= 2 * U, name     # one rounding of what is saved
    assert max(rel_err(grads[n], exact[n]) for n in grads) >= U / 16


@pytest.mark.parametrize("precision,head_gemm,backward_gemm",
                         [("bf16", "gemm_bf16_c16", "gemm_bf16"),
                          ("bf16-storage", "gemm_c16", "gemm_a16"),
                          ("fp32", "gemm", "gemm")])
def test_logits_and_their_gradient_are_stored_in_bf16(rt1, precision, head_gemm,
                                                      backward_gemm):
    """Under a bf16 mode the head's GEMM writes bf16 logits, the cross-entropy reads them
    and writes a bf16 gradient, which the head backward's GEMMs read as it is (no float32
    logits-sized tensor); fp32 keeps float32 logits. And
    n_embd in several tiles keeps float32 logits (the sums span tasks)."""
    cfg = dataclasses.replace(BASE, n_layer=1, vocab_size=400, vocab_tile=100)
    ids, labels = batch(cfg, B=2, T=8)
    model = nl.GPT2(cfg, seed=2, precision=precision)
    with Trace(rt1) as tr:
        model.forward_backward(ids, labels)
        rt1.wait()
    names = tr.tasks["name"]
    bf16, nv = precision != "fp32", 4                   # 4 vocabulary tiles, 1 token tile
    assert (names == head_gemm).sum() >= nv
    assert (names == "cross_entropy_stats_bf16").sum() == (nv if bf16 else 0)
    assert (names == "cross_entropy_backward_bf16").sum() == (nv if bf16 else 0)
    assert (names == "cross_entropy_backward").sum() == (0 if bf16 else nv)
    assert (names == backward_gemm).sum() >= 2 * nv                # dxf and dwte
    model.free()
    tiled = dataclasses.replace(cfg, embd_tile=32)
    model = nl.GPT2(tiled, seed=2, precision=precision)
    with Trace(rt1) as tr:
        model.forward_backward(ids, labels)
        rt1.wait()
    assert (tr.tasks["name"] == "cross_entropy_backward").sum() == nv
    model.free()


def test_weight_copies_follow_every_update(rt1):
    """The bf16 copies are the rounded master weights after construction, each optimizer
    step and a state-dict load: bit for bit, so no step reads a stale weight."""
    cfg = dataclasses.replace(BASE, n_layer=1, **TILINGS["leftovers"])
    model = nl.GPT2(cfg, seed=3, precision="bf16")
    names = set(model.params16)
    assert names == {n for n, p in model.params.items() if p.ndim == 2} - {
        "transformer.wpe.weight"}

    def copies_are_current():
        for n in names:
            want = model.params[n].to_numpy().astype(ml_dtypes.bfloat16)
            assert np.array_equal(model.params16[n].to_numpy().view(np.uint16),
                                  want.view(np.uint16)), n
    copies_are_current()
    opt = AdamW(model, lr=1e-2)
    for seed in range(2):
        model.forward_backward(*batch(cfg, seed=seed))
        opt.step(clip_norm=1.0)
        copies_are_current()
    state = {k: v * 1.5 for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    copies_are_current()
    model.free()


def test_a_few_bf16_steps_track_fp32(rt1):
    """Training: 25 AdamW steps in bf16 and in bf16-storage follow fp32's losses."""
    cfg = dataclasses.replace(BASE, n_layer=1, batch_tile=1, vocab_tile=50)
    losses = {}
    for precision in ("fp32", "bf16", "bf16-storage"):
        model = nl.GPT2(cfg, seed=6, precision=precision)
        opt = AdamW(model, lr=3e-3, weight_decay=0.0)
        out = []
        for step in range(25):
            out.append(model.forward_backward(*batch(cfg, B=2, T=16, seed=step % 5)))
            opt.step(clip_norm=1.0)
        losses[precision] = np.array(out)
        model.free()
    fp32 = losses["fp32"]
    assert fp32[-1] < fp32[0] - 1.0, "fp32 did not learn: a useless comparison"
    for precision in ("bf16", "bf16-storage"):
        diff = np.abs(losses[precision] - fp32)
        assert diff.max() <= 0.02 * fp32.max(), (precision, diff.max())
        assert diff[-5:].mean() <= 0.01 * fp32[-5:].mean(), (precision, diff[-5:])


def test_bad_precision_is_one_clear_error(rt1):
    with pytest.raises(ValueError, match=r"precision='fp16' is unknown; valid ones: fp32, "
                                         r"bf16, bf16-storage"):
        nl.GPT2(BASE, precision="fp16")
    with pytest.raises(ValueError, match=r"precision='auto' is resolved before a model is "
                                         r"built"):
        nl.GPT2(BASE, precision="auto")
