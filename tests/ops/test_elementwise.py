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
