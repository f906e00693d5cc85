import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.test_reduce import axis_case, sum_ulps
from tests.strategies import seeds
from tests.tolerance import assert_close


def masked_input(rng, shape, axis, scale):
    """Values of size ``scale`` (exp would overflow float32 without the max shift),
    with -inf entries as a causal mask leaves them, never a whole fiber."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    mask = rng.random(shape) < 0.3
    keep = np.expand_dims(rng.integers(0, shape[axis], np.delete(shape, axis)), axis)
    np.put_along_axis(mask, keep, False, axis)
    x[mask] = -np.inf
    return x


def softmax_ref(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def softmax_magnitude(x, axis):
    """What softmax's float32 error is relative to: y·(1 + |x − max|) — x − max rounds
    relative to itself, and exp turns that into a relative error of y |x − max| times as
    large (a logit of 100 below the max: y ≈ e⁻¹⁰⁰ with 100 ulps of room)."""
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):   # -inf − max: a masked entry, y = 0
        shift = np.nan_to_num(abs(x - x.max(axis, keepdims=True)), posinf=0.0)
    return softmax_ref(x, axis) * (1 + shift)


@given(axis_case(), st.sampled_from([1.0, 100.0]), st.booleans(), seeds())
def test_softmax(rt, case, scale, in_place, seed):
    shape, tiles, axis = case
    x = masked_input(np.random.default_rng(seed), shape, axis % len(shape), scale)
    tx = nl.from_numpy(x, tiles)
    y = nl.ops.softmax(tx, axis, out=tx if in_place else None)
    assert (y is tx) == in_place
    # exp (1.5 ulps), the sum of the fiber's tiles, the division
    assert_close(y.to_numpy(), softmax_ref(x, axis), softmax_magnitude(x, axis),
                 ulps=4 + sum_ulps(shape, tiles, [axis % len(shape)]), what=(shape, tiles))


def exact_softmax(rng, shape, axis, scale):
    """Logits and their softmax y where y is exact in float32 and sums to 1 exactly
    (multiples of 2⁻²⁰): torch's float64 gradient is then the gradient at the very
    y the op is given. (A float32-rounded y moves a peaked row's gradient, where
    dy − Σ dy·y cancels, far beyond float32 precision.)"""
    c = np.round(softmax_ref(masked_input(rng, shape, axis, scale), axis) * 2**20)
    top = np.expand_dims(c.argmax(axis), axis)
    np.put_along_axis(c, top, np.take_along_axis(c, top, axis)
                      + 2**20 - c.sum(axis, keepdims=True), axis)
    with np.errstate(divide="ignore"):
        return np.log(c), (c / 2**20).astype(np.float32)


@given(axis_case(), st.sampled_from([1.0, 5.0]), st.booleans(), seeds())
def test_softmax_backward_vs_torch(rt, case, scale, accumulate, seed):
    torch = require("torch")
    shape, tiles, axis = case
    rng = np.random.default_rng(seed)
    a = axis % len(shape)
    logits, y = exact_softmax(rng, shape, a, scale)
    dy = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    torch.softmax(xt, axis).backward(torch.tensor(dy, dtype=torch.float64))
    want = xt.grad.numpy()
    dx0 = rng.standard_normal(shape).astype(np.float32) if accumulate else None
    dx = nl.ops.softmax_backward(nl.from_numpy(y, tiles), nl.from_numpy(dy, tiles), axis,
                                 None if dx0 is None else nl.from_numpy(dx0, tiles))
    # dx = y·(dy − Σ y·dy): relative to y·(|dy| + Σ|y·dy|), the sum's tiles' roundings
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    mag = y64 * (abs(dy64) + abs(y64 * dy64).sum(a, keepdims=True))
    assert_close(dx.to_numpy(), want + (0 if dx0 is None else dx0),
                 mag + (0 if dx0 is None else abs(dx0)),
                 ulps=4 + sum_ulps(shape, tiles, [a]), what=(shape, tiles, axis))
    # dx sums to 0 along the axis (as the true gradient) even from a y whose sum
    # is off 1 (by rounding; here, to tell, by 1e-3): its rounding is all that is left
    y = (softmax_ref(logits, axis) * (1 + 1e-3)).astype(np.float32)
    dx = nl.ops.softmax_backward(nl.from_numpy(y, tiles), nl.from_numpy(dy, tiles), axis)
    dx = dx.to_numpy().astype(np.float64)
    assert np.all(abs(dx.sum(axis)) <= 1e-6 * abs(dx).sum(axis) + 1e-30)


def test_bad_inputs(rt1):
    x = nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"axis=2 is out of range"):
        nl.ops.softmax(x, 2)
    with pytest.raises(ValueError, match=r"out is .*tile_shape=\(4, 3\).* out \(like x .*\) "
                                         r"must have shape \(4, 6\) with tile_shape \(2, 3\)"):
        nl.ops.softmax(x, 1, out=nl.zeros((4, 6), (4, 3)))
    with pytest.raises(ValueError, match=r"dy is .*shape=\(6, 4\).* dy \(like y .*\) must"):
        nl.ops.softmax_backward(x, nl.zeros((6, 4)), 0)
    with pytest.raises(ValueError, match=r"dx is .* dx \(like y .*\) must have shape"):
        nl.ops.softmax_backward(x, nl.zeros((4, 6), (2, 3)), 0, dx=nl.zeros((4, 6)))
