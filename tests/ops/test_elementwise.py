import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.elementwise_ref import gelu, gelu_derivative, reference
from tests.strategies import seeds, shape_and_tiles
from tests.tolerance import assert_close

# scalars a float32 kernel represents exactly enough (no float64-only underflow)
SCALARS = st.floats(-3, 3).filter(lambda a: a == 0 or abs(a) > 1e-3)


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(got, name, arrays, scalars=None, what=None):
    """``got`` against op ``name``'s float64 reference (tests/ops/elementwise_ref.py)."""
    want, magnitude, ulps = reference(name, arrays, scalars or {})
    assert_close(got, want, magnitude, ulps=ulps, what=what or name)


@given(shape_and_tiles(), SCALARS, SCALARS, seeds())
def test_add_axpby(rt, st_, alpha, beta, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x, y = rand(rng, shape), rand(rng, shape)
    ty = nl.from_numpy(y, tiles)
    nl.ops.add(nl.from_numpy(x, tiles), ty, alpha, beta)
    # relative to |αx| + |βy|: when αx ≈ −βy the sum cancels, and float32 rounding
    # of the terms (not a bug) dominates a plain relative error
    check(ty.to_numpy(), "add", {"x": x, "y": y}, {"alpha": alpha, "beta": beta})


@given(shape_and_tiles(), SCALARS, seeds())
def test_scale_copy_fill(rt, st_, alpha, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x = rand(rng, shape)
    tx = nl.from_numpy(x, tiles)
    check(nl.ops.scale(tx, alpha).to_numpy(), "scale", {"x": x}, {"alpha": alpha})
    assert np.array_equal(nl.ops.copy(tx).to_numpy(), x)
    assert np.array_equal(nl.full(shape, alpha, tiles).to_numpy(),
                          np.full(shape, alpha, np.float32))
    ids = rng.integers(0, 50257, shape)
    assert np.array_equal(nl.ops.copy(nl.from_numpy(ids, tiles)).to_numpy(), ids)


def test_fill_after_a_bf16_or_float32_tensor(rt1):
    """``after`` only orders the fill (its values are never read): a float32 or a bfloat16
    one (the bf16 modes' logits gradient, out of core); another dtype is refused."""
    rng = np.random.default_rng(0)
    y = nl.zeros((5, 7), (2, 3))
    for after in (nl.from_numpy(rand(rng, (3, 4)), (2, 2)),
                  nl.ops.to_bf16(nl.from_numpy(rand(rng, (3, 4)), (2, 2)))):
        nl.ops.fill(y, 2.5, after=after)
        assert np.array_equal(y.to_numpy(), np.full((5, 7), 2.5, np.float32))
    with pytest.raises(TypeError, match="after must be float32, got int64"):
        nl.ops.fill(y, 1.0, after=nl.from_numpy(np.zeros(3, np.int64)))


@given(shape_and_tiles(), seeds())
def test_mul(rt, st_, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    a, b = rand(rng, shape), rand(rng, shape)
    got = nl.ops.mul(nl.from_numpy(a, tiles), nl.from_numpy(b, tiles), alpha=0.5)
    check(got.to_numpy(), "mul", {"a": a, "b": b}, {"alpha": 0.5})


@given(shape_and_tiles(), seeds())
def test_gelu_forward_backward_vs_torch(rt, st_, seed):
    torch = require("torch")
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x, dy = rand(rng, shape) * 2, rand(rng, shape)
    tx = nl.from_numpy(x, tiles)
    # the value: the σ form in float64 (elementwise_ref); the magnitude, the formula's terms
    # with u's rounding through σ(2u): far out in the negative tail the result is
    # ill-conditioned in float32 and the magnitude says how much
    check(nl.ops.gelu(tx).to_numpy(), "gelu", {"x": x})
    dx = nl.ops.gelu_backward(tx, nl.from_numpy(dy, tiles))
    check(dx.to_numpy(), "gelu_backward", {"x": x, "dy": dy})
    # beta accumulates into an existing gradient
    d0 = dx.to_numpy()
    nl.ops.gelu_backward(tx, nl.from_numpy(dy, tiles), dx, beta=1.0)
    check(dx.to_numpy(), "gelu_backward", {"x": x, "dy": dy, "dx": d0}, {"beta": 1.0})
    # that reference is GPT-2's GELU: PyTorch's tanh form in float64, where its 1 + tanh(u)
    # keeps float64's digits (|x| ≤ 5: beyond, it cancels, and PyTorch is the inexact one)
    # (to 3e-9 relative: a wrong constant or form is off by 1e-3)
    xc = np.clip(x, -5, 5)
    xt = torch.tensor(xc, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.gelu(xt, approximate="tanh")
    y.backward(torch.tensor(dy, dtype=torch.float64))
    assert_close(y.detach().numpy(), gelu(xc)[0], ulps=0.05, what="torch gelu")
    assert_close(xt.grad.numpy(), dy * gelu_derivative(xc)[0],
                 abs(dy) * gelu_derivative(xc)[1], ulps=0.05, what="torch gelu'")


def test_mismatched_tiles_rejected(rt1):
    a = nl.zeros((4, 4), (2, 2))
    b = nl.zeros((4, 4), (4, 2))
    with pytest.raises(ValueError, match=r"tile"):
        nl.ops.add(a, b)


@given(shape_and_tiles(), SCALARS, seeds())
def test_relu_forward_backward(rt, st_, beta, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x, dy, dx0 = rand(rng, shape) * 4, rand(rng, shape), rand(rng, shape)
    x.flat[::3] = 0.0                                  # the kink: the derivative is 0 there
    tx, tdy = nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles)
    assert np.array_equal(nl.ops.relu(tx).to_numpy(), np.maximum(x, 0))
    g = np.where(x > 0, dy, 0).astype(np.float64)
    assert np.array_equal(nl.ops.relu_backward(tx, tdy).to_numpy(), g)
    dx = nl.from_numpy(dx0, tiles)                     # β accumulates into a given dx
    nl.ops.relu_backward(tx, tdy, dx, beta=beta)
    check(dx.to_numpy(), "relu_backward", {"x": x, "dy": dy, "dx": dx0}, {"beta": beta})
    nl.ops.relu(tx, out=tx)                            # in place
    assert np.array_equal(tx.to_numpy(), np.maximum(x, 0))


@given(shape_and_tiles(), SCALARS, seeds())
def test_silu_forward_backward(rt, st_, beta, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x, dy, dx0 = rand(rng, shape) * 4, rand(rng, shape), rand(rng, shape)
    tx, tdy = nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles)
    check(nl.ops.silu(tx).to_numpy(), "silu", {"x": x})
    # 1 + x·(1 − s) cancels near x ≈ −1.28: the reference's magnitude is the terms'
    check(nl.ops.silu_backward(tx, tdy).to_numpy(), "silu_backward", {"x": x, "dy": dy})
    dx = nl.from_numpy(dx0, tiles)
    nl.ops.silu_backward(tx, tdy, dx, beta=beta)
    check(dx.to_numpy(), "silu_backward", {"x": x, "dy": dy, "dx": dx0}, {"beta": beta})
    nl.ops.silu(tx, out=tx)
    check(tx.to_numpy(), "silu", {"x": x}, what="silu in place")


def test_relu_silu_tails_and_nan(rt1):
    """Far out (exp under- or overflows) and NaN: finite where the function is, NaN kept."""
    x = np.float32([-1e4, -200, -88, -87, -20, -1e-30, 0, 1e-30, 20, 88, 200, 1e4, np.nan])
    tx = nl.from_numpy(x, (4,))
    relu, silu = nl.ops.relu(tx).to_numpy(), nl.ops.silu(tx).to_numpy()
    dy = nl.from_numpy(np.ones_like(x), (4,))
    drelu, dsilu = (f(tx, dy).to_numpy() for f in (nl.ops.relu_backward, nl.ops.silu_backward))
    ok = ~np.isnan(x)
    assert np.isnan(relu[-1]) and np.isnan(silu[-1]) and np.isnan(dsilu[-1])
    assert np.array_equal(relu[ok], np.maximum(x[ok], 0))
    assert np.array_equal(drelu[ok], (x[ok] > 0).astype(np.float32))
    # exp flushes below float32's normal range (e^-87.3): absolute error ≤ |x|·1e-38 there
    for got, name in ((silu, "silu"), (dsilu, "silu_backward")):
        want, mag, ulps = reference(name, {"x": x[ok], "dy": np.ones_like(x[ok])}, {})
        assert_close(got[ok], want, mag, ulps=ulps, floor=1e-30, what=name)
