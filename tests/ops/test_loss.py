import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.test_reduce import n_tiles
from tests.strategies import seeds, shape_and_tiles, tile_for
from tests.tolerance import U32, U_BF16, assert_close

torch = require("torch")


@st.composite
def loss_case(draw):
    """Token shape/tiles and a vocabulary V, often split into several tiles."""
    shape, tiles = draw(shape_and_tiles(max_ndim=2, max_dim=9))
    vocab = draw(st.integers(1, 13))
    return shape, tiles, vocab, tile_for(draw, vocab)


def reference(logits, labels, grad_scale):
    """torch's loss and (scaled) gradient in float64."""
    x = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(x.reshape(-1, logits.shape[-1]),
                                             torch.tensor(labels).reshape(-1))
    (grad_scale * loss).backward()
    return loss.item(), x.grad.numpy()


def magnitudes(logits, labels, grad_scale):
    """What the loss's and the gradient's float32 errors are relative to. Per token the
    kernel forms log Σ exp(x − m) − (x_label − m) (m the row's max: x − m is exact or
    rounds relative to itself, never to |m|), so its terms are log Σ, |x_label − m| and
    each exp's argument error Σ p·|x − m|; the loss is their mean. The gradient
    scale/N·(p − onehot): p's error relative to p·(1 + |x − m| + Σ p·|x − m|), and the
    one at the label (p − 1 cancels where p → 1)."""
    x = np.asarray(logits, np.float64).reshape(-1, logits.shape[-1])
    lab = np.asarray(labels).reshape(-1)
    shift = x - x.max(1, keepdims=True)
    lse = np.log(np.exp(shift).sum(1, keepdims=True))
    p = np.exp(shift - lse)
    spread = (p * abs(shift)).sum(1, keepdims=True)
    rows = np.arange(len(lab))
    token = lse[:, 0] + abs(shift[rows, lab]) + spread[:, 0]
    onehot = np.zeros_like(x)
    onehot[rows, lab] = 1
    d = grad_scale / len(lab) * (p * (1 + abs(shift) + spread) + onehot)
    return token.mean(), d.reshape(logits.shape)


def loss_ulps(shape, tiles, vt, vocab) -> float:
    """A token's exps and logs (a few), the merges of the vocabulary tiles' partial
    results, and the mean's float32 partial sums over the token tiles."""
    return 8 + n_tiles((vocab,), (vt,), [0]) + n_tiles(shape, tiles, range(len(shape)))


def check_loss(got_loss, got_d, logits, labels, grad_scale, shape, tiles, vt, vocab):
    """Loss (and the gradient, unless None) against PyTorch's float64."""
    want, dwant = reference(logits, labels, grad_scale)
    mag, dmag = magnitudes(logits, labels, grad_scale)
    ulps = loss_ulps(shape, tiles, vt, vocab)
    assert_close(got_loss, [want], [mag], ulps=ulps, what="loss")
    if got_d is not None:
        assert_close(got_d, dwant, dmag, ulps=ulps, what="dlogits")


@given(loss_case(), st.floats(0.1, 4), st.sampled_from([0.0, 1000.0]), seeds())
def test_loss_and_gradient_vs_torch(rt, case, grad_scale, shift, seed):
    shape, tiles, vocab, vt = case
    rng = np.random.default_rng(seed)
    # shift: huge logits stay finite (the running max keeps exp() in range)
    logits = (3 * rng.standard_normal(shape + (vocab,)) + shift).astype(np.float32)
    labels = rng.integers(0, vocab, shape)
    tx, tl = nl.from_numpy(logits, tiles + (vt,)), nl.from_numpy(labels, tiles)
    loss, none = nl.ops.cross_entropy(tx, tl)
    assert none is None and loss.shape == (1,)
    check_loss(loss.to_numpy(), None, logits, labels, grad_scale, shape, tiles, vt, vocab)
    loss, dlogits = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale)
    assert dlogits.traits == tx.traits
    check_loss(loss.to_numpy(), dlogits.to_numpy(), logits, labels, grad_scale, shape, tiles,
               vt, vocab)


@given(loss_case(), st.floats(0.1, 4), seeds())
def test_gradient_written_over_the_logits(rt, case, grad_scale, seed):
    """``out=logits``: the same bits as a separate gradient, the loss unchanged."""
    shape, tiles, vocab, vt = case
    rng = np.random.default_rng(seed)
    logits = (3 * rng.standard_normal(shape + (vocab,))).astype(np.float32)
    labels = rng.integers(0, vocab, shape)
    tl = nl.from_numpy(labels, tiles)
    loss, dsep = nl.ops.cross_entropy(nl.from_numpy(logits, tiles + (vt,)), tl, grad=True,
                                      grad_scale=grad_scale)
    tx = nl.from_numpy(logits, tiles + (vt,))
    loss2, d = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale, out=tx)
    assert d is tx
    assert np.array_equal(d.to_numpy(), dsep.to_numpy())
    assert np.array_equal(loss2.to_numpy(), loss.to_numpy())
    check_loss(loss.to_numpy(), d.to_numpy(), logits, labels, grad_scale, shape, tiles, vt,
               vocab)


def test_many_vocabulary_tiles(rt1):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 6, 1000)).astype(np.float32)
    labels = rng.integers(0, 1000, (4, 6))
    loss, d = nl.ops.cross_entropy(nl.from_numpy(logits, (3, 4, 64)),
                                   nl.from_numpy(labels, (3, 4)), grad=True)
    check_loss(loss.to_numpy(), d.to_numpy(), logits, labels, 1.0, (4, 6), (3, 4), 64, 1000)


@pytest.mark.parametrize("bad", [7, -3])
def test_out_of_range_label_is_a_task_error(rt1, bad):
    logits = nl.zeros((2, 3, 7), (1, 2, 3))
    labels = nl.from_numpy(np.array([[0, 1, 2], [3, bad, 6]]), (1, 2))
    with pytest.raises(nl.TaskError, match=rf"label {bad} is outside the vocabulary of 7"):
        nl.ops.cross_entropy(logits, labels, grad=True)[0].to_numpy()
    # the runtime keeps working
    good = nl.from_numpy(np.array([[0, 1, 2], [3, 4, 6]]), (1, 2))
    loss, _ = nl.ops.cross_entropy(logits, good)
    assert_close(loss.to_numpy(), [np.log(7)], ulps=8, what="uniform logits")


def test_bad_inputs_raise_clear_errors(rt1):
    labels = nl.from_numpy(np.array([0, 1, 2]), (2,))
    with pytest.raises(TypeError, match="labels must be int64, got float32"):
        nl.ops.cross_entropy(nl.zeros((3, 5), (2, 5)), nl.zeros((3,), (2,)))
    with pytest.raises(TypeError, match="logits must be float32, got int64"):
        nl.ops.cross_entropy(nl.zeros((3, 5), (2, 5), np.int64), labels)
    with pytest.raises(ValueError, match="labels' shape and tiles"):
        nl.ops.cross_entropy(nl.zeros((3, 5), (3, 5)), labels)
    with pytest.raises(ValueError, match="labels' shape and tiles"):
        nl.ops.cross_entropy(nl.zeros((4, 5), (2, 5)), labels)
    logits = nl.zeros((3, 5), (2, 5))
    before = rt1.ntensors
    with pytest.raises(ValueError, match="pass grad=True") as refused:
        nl.ops.cross_entropy(logits, labels, out=logits)
    assert rt1.ntensors == before, refused   # refused before any tensor or task
    with pytest.raises(ValueError, match="shapes/tiles differ"):
        nl.ops.cross_entropy(logits, labels, grad=True, out=nl.zeros((3, 5), (3, 5)))
    with pytest.raises(ValueError, match="out shares its tiles with logits"):
        nl.ops.cross_entropy(logits, labels, grad=True, out=logits.split_axis(1, 5))


# ---- bf16 logits (the bf16 precision modes) ----------------------------------------------
BF16 = np.dtype(ml_dtypes.bfloat16)


def check_bf16_gradient(got, logits, labels, grad_scale, ulps):
    """The bf16 gradient is the float32 one rounded once: half a bf16 ulp of each value
    (in bf16 units) plus the float32 computation's ulps of its magnitude (converted)."""
    _, dwant = reference(logits, labels, grad_scale)
    _, dmag = magnitudes(logits, labels, grad_scale)
    assert_close(got, dwant, abs(dwant) + ulps * (U32 / U_BF16) * dmag, ulps=1, unit=U_BF16,
                 what="bf16 dlogits")


@given(loss_case(), st.floats(0.1, 4), st.sampled_from([0.0, 1000.0]), st.booleans(), seeds())
def test_bf16_logits_computed_in_float32(rt, case, grad_scale, shift, in_place, seed):
    """bf16 logits are widened (exactly) and everything is computed as from float32: the
    loss against float64 of the same bf16 values within float32's ulps; the bf16 gradient
    is the float64 one rounded once: within half a bf16 ulp (2^-8 of each value) plus
    float32 noise. ``in_place``: the gradient written over the logits (``out=logits``)."""
    shape, tiles, vocab, vt = case
    rng = np.random.default_rng(seed)
    logits = (3 * rng.standard_normal(shape + (vocab,)) + shift).astype(BF16)
    labels = rng.integers(0, vocab, shape)
    wide = logits.astype(np.float64)
    tx, tl = nl.from_numpy(logits, tiles + (vt,)), nl.from_numpy(labels, tiles)
    loss, none = nl.ops.cross_entropy(tx, tl)
    assert none is None
    check_loss(loss.to_numpy(), None, wide, labels, grad_scale, shape, tiles, vt, vocab)
    loss, d = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale,
                                   out=tx if in_place else None)
    assert d.dtype == BF16 and d.traits == tx.traits and (d is tx) == in_place
    check_loss(loss.to_numpy(), None, wide, labels, grad_scale, shape, tiles, vt, vocab)
    check_bf16_gradient(d.to_numpy(), wide, labels, grad_scale,
                        loss_ulps(shape, tiles, vt, vocab))


def test_bf16_logits_many_vocabulary_tiles(rt1):
    """A vocabulary of 5000 in tiles of 1100 (the rows are read in blocks of 1024: blocks
    and tails) against float64."""
    rng = np.random.default_rng(1)
    logits = (4 * rng.standard_normal((3, 5, 5000))).astype(BF16)
    labels = rng.integers(0, 5000, (3, 5))
    wide = logits.astype(np.float64)
    loss, d = nl.ops.cross_entropy(nl.from_numpy(logits, (2, 3, 1100)),
                                   nl.from_numpy(labels, (2, 3)), grad=True)
    check_loss(loss.to_numpy(), None, wide, labels, 1.0, (3, 5), (2, 3), 1100, 5000)
    check_bf16_gradient(d.to_numpy(), wide, labels, 1.0, loss_ulps((3, 5), (2, 3), 1100, 5000))


def test_bf16_logits_refuse_an_out_of_another_dtype(rt1):
    x16 = nl.ops.to_bf16(nl.zeros((2, 3, 7), (1, 2, 3)))
    labels = nl.from_numpy(np.zeros((2, 3), np.int64), (1, 2))
    with pytest.raises(TypeError, match=r"cross_entropy: out \(logits' dtype\) must be "
                                        "bfloat16, got float32"):
        nl.ops.cross_entropy(x16, labels, grad=True, out=nl.zeros((2, 3, 7), (1, 2, 3)))
    bad = nl.from_numpy(np.array([[0, 1, 2], [3, 9, 6]]), (1, 2))
    with pytest.raises(nl.TaskError, match="label 9 is outside the vocabulary of 7"):
        nl.ops.cross_entropy(x16, bad)
        nl.Runtime.current().wait()
