import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import cond_err, rel_err, require
from tests.strategies import shape_and_tiles

RNG = np.random.default_rng(0)
# scalars a float32 kernel represents exactly enough (no float64-only underflow)
SCALARS = st.floats(-3, 3).filter(lambda a: a == 0 or abs(a) > 1e-3)


def rand(shape):
    return RNG.standard_normal(shape).astype(np.float32)


def gelu_ref(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


@given(shape_and_tiles(), SCALARS, SCALARS)
def test_add_axpby(rt, st_, alpha, beta):
    shape, tiles = st_
    x, y = rand(shape), rand(shape)
    ty = nl.from_numpy(y, tiles)
    nl.ops.add(nl.from_numpy(x, tiles), ty, alpha, beta)
    ax, by = np.float32(alpha) * x.astype(np.float64), np.float32(beta) * y.astype(np.float64)
    # relative to |αx| + |βy|: when αx ≈ −βy the sum cancels, and float32 rounding
    # of the terms (not a bug) dominates a plain relative error
    assert cond_err(ty.to_numpy(), ax + by, abs(ax) + abs(by)) <= 1e-6


@given(shape_and_tiles(), SCALARS)
def test_scale_copy_fill(rt, st_, alpha):
    shape, tiles = st_
    x = rand(shape)
    tx = nl.from_numpy(x, tiles)
    assert rel_err(nl.ops.scale(tx, alpha).to_numpy(), alpha * x.astype(np.float64)) <= 1e-6
    assert np.array_equal(nl.ops.copy(tx).to_numpy(), x)
    assert np.array_equal(nl.full(shape, alpha, tiles).to_numpy(),
                          np.full(shape, alpha, np.float32))
    ids = RNG.integers(0, 50257, shape)
    assert np.array_equal(nl.ops.copy(nl.from_numpy(ids, tiles)).to_numpy(), ids)


def test_fill_after_a_bf16_or_float32_tensor(rt1):
    """``after`` only orders the fill (its values are never read): a float32 or a bfloat16
    one (the bf16 modes' logits gradient, out of core); another dtype is refused."""
    y = nl.zeros((5, 7), (2, 3))
    for after in (nl.from_numpy(rand((3, 4)), (2, 2)),
                  nl.ops.to_bf16(nl.from_numpy(rand((3, 4)), (2, 2)))):
        nl.ops.fill(y, 2.5, after=after)
        assert np.array_equal(y.to_numpy(), np.full((5, 7), 2.5, np.float32))
    with pytest.raises(TypeError, match="after must be float32, got int64"):
        nl.ops.fill(y, 1.0, after=nl.from_numpy(np.zeros(3, np.int64)))


@given(shape_and_tiles())
def test_mul(rt, st_):
    shape, tiles = st_
    a, b = rand(shape), rand(shape)
    got = nl.ops.mul(nl.from_numpy(a, tiles), nl.from_numpy(b, tiles), alpha=0.5)
    assert rel_err(got.to_numpy(), 0.5 * a.astype(np.float64) * b) <= 1e-6


@given(shape_and_tiles())
def test_gelu_forward_backward_vs_torch(rt, st_):
    torch = require("torch")
    shape, tiles = st_
    # |x| ≤ 5: further out, GELU's tail (< 1e-6) is ill-conditioned in float32
    # (condition number ~60), so no float32 code meets 1e-5 there against float64
    x, dy = np.clip(rand(shape) * 2, -5, 5), rand(shape)
    tx = nl.from_numpy(x, tiles)
    assert rel_err(nl.ops.gelu(tx).to_numpy(), gelu_ref(x)) <= 1e-5
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.gelu(xt, approximate="tanh").backward(torch.tensor(dy, dtype=torch.float64))
    dx = nl.ops.gelu_backward(tx, nl.from_numpy(dy, tiles))
    assert rel_err(dx.to_numpy(), xt.grad.numpy()) <= 1e-5
    # beta accumulates into an existing gradient
    nl.ops.gelu_backward(tx, nl.from_numpy(dy, tiles), dx, beta=1.0)
    assert rel_err(dx.to_numpy(), 2 * xt.grad.numpy()) <= 1e-5


def test_mismatched_tiles_rejected(rt1):
    a = nl.zeros((4, 4), (2, 2))
    b = nl.zeros((4, 4), (4, 2))
    with pytest.raises(ValueError, match=r"tile"):
        nl.ops.add(a, b)


def sigmoid_ref(x):
    with np.errstate(over="ignore"):              # exp(1e4) = inf: σ = 0, as it should be
        return 1 / (1 + np.exp(-x.astype(np.float64)))


@given(shape_and_tiles(), SCALARS)
def test_relu_forward_backward(rt, st_, beta):
    shape, tiles = st_
    x, dy, dx0 = rand(shape) * 4, rand(shape), rand(shape)
    x.flat[::3] = 0.0                                  # the kink: the derivative is 0 there
    tx, tdy = nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles)
    assert np.array_equal(nl.ops.relu(tx).to_numpy(), np.maximum(x, 0))
    g = np.where(x > 0, dy, 0).astype(np.float64)
    assert np.array_equal(nl.ops.relu_backward(tx, tdy).to_numpy(), g)
    dx = nl.from_numpy(dx0, tiles)                     # β accumulates into a given dx
    nl.ops.relu_backward(tx, tdy, dx, beta=beta)
    assert cond_err(dx.to_numpy(), g + np.float32(beta) * dx0,
                    abs(g) + abs(np.float32(beta) * dx0)) <= 1e-6
    nl.ops.relu(tx, out=tx)                            # in place
    assert np.array_equal(tx.to_numpy(), np.maximum(x, 0))


@given(shape_and_tiles(), SCALARS)
def test_silu_forward_backward(rt, st_, beta):
    shape, tiles = st_
    x, dy, dx0 = rand(shape) * 4, rand(shape), rand(shape)
    tx, tdy = nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles)
    s = sigmoid_ref(x)
    assert rel_err(nl.ops.silu(tx).to_numpy(), x * s) <= 1e-6
    g = dy * s * (1 + x * (1 - s))
    # 1 + x·(1 − s) cancels near x ≈ −1.28: the error float32 allows is relative to the terms
    terms = abs(dy) * s * (1 + abs(x) * (1 - s))
    assert cond_err(nl.ops.silu_backward(tx, tdy).to_numpy(), g, terms) <= 1e-6
    dx = nl.from_numpy(dx0, tiles)
    nl.ops.silu_backward(tx, tdy, dx, beta=beta)
    assert cond_err(dx.to_numpy(), g + np.float32(beta) * dx0,
                    abs(g) + abs(np.float32(beta) * dx0)) <= 1e-6
    nl.ops.silu(tx, out=tx)
    assert rel_err(tx.to_numpy(), x * s) <= 1e-6


def test_relu_silu_tails_and_nan(rt1):
    """Far out (exp under- or overflows) and NaN: finite where the function is, NaN kept."""
    x = np.float32([-1e4, -200, -88, -87, -20, -1e-30, 0, 1e-30, 20, 88, 200, 1e4, np.nan])
    tx = nl.from_numpy(x, (4,))
    relu, silu = nl.ops.relu(tx).to_numpy(), nl.ops.silu(tx).to_numpy()
    dy = nl.from_numpy(np.ones_like(x), (4,))
    drelu, dsilu = (f(tx, dy).to_numpy() for f in (nl.ops.relu_backward, nl.ops.silu_backward))
    x64, s = x.astype(np.float64), sigmoid_ref(x)
    ok = ~np.isnan(x)
    assert np.isnan(relu[-1]) and np.isnan(silu[-1]) and np.isnan(dsilu[-1])
    assert np.array_equal(relu[ok], np.maximum(x[ok], 0))
    assert np.array_equal(drelu[ok], (x[ok] > 0).astype(np.float32))
    np.testing.assert_allclose(silu[ok], (x64 * s)[ok], rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(dsilu[ok], (s * (1 + x64 * (1 - s)))[ok], rtol=1e-6, atol=1e-30)
