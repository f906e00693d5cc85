import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import rel_err, require
from tests.strategies import shape_and_tiles, tile_for

torch = require("torch")
RNG = np.random.default_rng(0)


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


@given(loss_case(), st.floats(0.1, 4), st.sampled_from([0.0, 1000.0]))
def test_loss_and_gradient_vs_torch(rt, case, grad_scale, shift):
    shape, tiles, vocab, vt = case
    # shift: huge logits stay finite (the running max keeps exp() in range)
    logits = (3 * RNG.standard_normal(shape + (vocab,)) + shift).astype(np.float32)
    labels = RNG.integers(0, vocab, shape)
    tx, tl = nl.from_numpy(logits, tiles + (vt,)), nl.from_numpy(labels, tiles)
    want, dwant = reference(logits, labels, grad_scale)
    loss, none = nl.ops.cross_entropy(tx, tl)
    assert none is None and loss.shape == (1,)
    assert rel_err(loss.to_numpy(), [want]) <= 1e-5
    loss, dlogits = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale)
    assert dlogits.traits == tx.traits
    assert rel_err(loss.to_numpy(), [want]) <= 1e-5
    assert rel_err(dlogits.to_numpy(), dwant) <= 1e-5


@given(loss_case(), st.floats(0.1, 4))
def test_gradient_written_over_the_logits(rt, case, grad_scale):
    """``out=logits``: the same bits as a separate gradient, the loss unchanged."""
    shape, tiles, vocab, vt = case
    logits = (3 * RNG.standard_normal(shape + (vocab,))).astype(np.float32)
    labels = RNG.integers(0, vocab, shape)
    tl = nl.from_numpy(labels, tiles)
    loss, dsep = nl.ops.cross_entropy(nl.from_numpy(logits, tiles + (vt,)), tl, grad=True,
                                      grad_scale=grad_scale)
    tx = nl.from_numpy(logits, tiles + (vt,))
    loss2, d = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale, out=tx)
    assert d is tx
    assert np.array_equal(d.to_numpy(), dsep.to_numpy())
    assert np.array_equal(loss2.to_numpy(), loss.to_numpy())
    _, dwant = reference(logits, labels, grad_scale)
    assert rel_err(d.to_numpy(), dwant) <= 1e-5


def test_many_vocabulary_tiles(rt1):
    logits = RNG.standard_normal((4, 6, 1000)).astype(np.float32)
    labels = RNG.integers(0, 1000, (4, 6))
    want, dwant = reference(logits, labels, 1.0)
    loss, d = nl.ops.cross_entropy(nl.from_numpy(logits, (3, 4, 64)),
                                   nl.from_numpy(labels, (3, 4)), grad=True)
    assert rel_err(loss.to_numpy(), [want]) <= 1e-5
    assert rel_err(d.to_numpy(), dwant) <= 1e-5


@pytest.mark.parametrize("bad", [7, -3])
def test_out_of_range_label_is_a_task_error(rt1, bad):
    logits = nl.zeros((2, 3, 7), (1, 2, 3))
    labels = nl.from_numpy(np.array([[0, 1, 2], [3, bad, 6]]), (1, 2))
    with pytest.raises(nl.TaskError, match=rf"label {bad} is outside the vocabulary of 7"):
        nl.ops.cross_entropy(logits, labels, grad=True)[0].to_numpy()
    # the runtime keeps working
    good = nl.from_numpy(np.array([[0, 1, 2], [3, 4, 6]]), (1, 2))
    loss, _ = nl.ops.cross_entropy(logits, good)
    assert rel_err(loss.to_numpy(), [np.log(7)]) <= 1e-6


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


@given(loss_case(), st.floats(0.1, 4), st.sampled_from([0.0, 1000.0]), st.booleans())
def test_bf16_logits_computed_in_float32(rt, case, grad_scale, shift, in_place):
    """bf16 logits are widened (exactly) and everything is computed as from float32: the
    loss against float64 of the same bf16 values to float32's 1e-5; the bf16 gradient is
    the float64 one rounded once: within half a bf16 ulp (2^-8 of each value) plus float32
    noise. ``in_place``: the gradient written over the logits (``out=logits``)."""
    shape, tiles, vocab, vt = case
    logits = (3 * RNG.standard_normal(shape + (vocab,)) + shift).astype(BF16)
    labels = RNG.integers(0, vocab, shape)
    tx, tl = nl.from_numpy(logits, tiles + (vt,)), nl.from_numpy(labels, tiles)
    want, dwant = reference(logits.astype(np.float64), labels, grad_scale)
    loss, none = nl.ops.cross_entropy(tx, tl)
    assert none is None and rel_err(loss.to_numpy(), [want]) <= 1e-5
    loss, d = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale,
                                   out=tx if in_place else None)
    assert d.dtype == BF16 and d.traits == tx.traits and (d is tx) == in_place
    assert rel_err(loss.to_numpy(), [want]) <= 1e-5
    got = d.to_numpy().astype(np.float64)
    assert np.all(np.abs(got - dwant) <= 2.0 ** -8 * np.abs(dwant) + 1e-6 * grad_scale)


def test_bf16_logits_many_vocabulary_tiles(rt1):
    """A vocabulary of 5000 in tiles of 1100 (the rows are read in blocks of 1024: blocks
    and tails) against float64."""
    logits = (4 * RNG.standard_normal((3, 5, 5000))).astype(BF16)
    labels = RNG.integers(0, 5000, (3, 5))
    want, dwant = reference(logits.astype(np.float64), labels, 1.0)
    loss, d = nl.ops.cross_entropy(nl.from_numpy(logits, (2, 3, 1100)),
                                   nl.from_numpy(labels, (2, 3)), grad=True)
    assert rel_err(loss.to_numpy(), [want]) <= 1e-5
    got = d.to_numpy().astype(np.float64)
    assert np.all(np.abs(got - dwant) <= 2.0 ** -8 * np.abs(dwant) + 1e-9)


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
