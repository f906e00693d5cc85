import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.strategies import seeds
from tests.tolerance import assert_close

SCALARS = st.floats(-3, 3).filter(lambda a: a == 0 or abs(a) > 1e-3)
MAX_DIM = {1: 13, 2: 13, 3: 8, 4: 6}
MAX_TILES = 150  # keeps an example's task count (and the file's runtime) small


@st.composite
def axis_case(draw):
    """(shape, tile shape, axis): 1–4 dimensions, any tiling with leftovers and
    size-1 tiles; the axis (possibly negative) is mostly split into several tiles.
    One case in four has long dimensions (up to 150, 6000 values in all), so that
    kernels meet fibers and rows longer than their 64-lane blocks."""
    ndim = draw(st.integers(1, 4))
    if ndim <= 3 and draw(st.integers(0, 3)) == 0:
        shape = []
        for _ in range(ndim):
            shape.append(draw(st.integers(1, min(150, 6000 // math.prod(shape)))))
        shape = draw(st.permutations(shape))
    else:
        shape = [draw(st.integers(1, MAX_DIM[ndim])) for _ in range(ndim)]
    axis = draw(st.integers(-ndim, ndim - 1))
    a = axis % ndim
    tiles = [draw(st.integers(1, s)) for s in shape]
    if shape[a] > 1 and draw(st.integers(0, 3)):
        tiles[a] = draw(st.integers(max(1, shape[a] // 8), shape[a] - 1))  # ≥ 2 tiles
    grid = [-(-s // t) for s, t in zip(shape, tiles)]
    while math.prod(grid) > MAX_TILES:  # coarsen the finest other dimension
        d = max((d for d in range(ndim) if d != a), key=lambda d: grid[d])
        tiles[d] = min(shape[d], 2 * tiles[d])
        grid[d] = -(-shape[d] // tiles[d])
    return tuple(shape), tuple(tiles), axis


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def drop(t, axis):
    axis %= len(t)
    return t[:axis] + t[axis + 1:]


def n_tiles(shape, tiles, axes) -> int:
    """Tiles along ``axes``: the float32 partial results a sum over them adds up."""
    return math.prod(-(-shape[d] // tiles[d]) for d in axes)


def sum_ulps(shape, tiles, axes) -> float:
    """The roundings of a sum over ``axes`` (each tile sums in double and rounds once; the
    partial sums add in float32, one rounding each), and α, β: relative to Σ|terms|.
    A sum that cancels to nearly 0 (a slice of two values, say) has no small error
    relative to itself in any float32 code."""
    return 4 + n_tiles(shape, tiles, axes)


def fiber_sum(x, axis):
    """Σ over every dimension but ``axis``, in float64."""
    return x.astype(np.float64).sum(axis=tuple(d for d in range(x.ndim) if d != axis % x.ndim))


def f32(v) -> np.float64:
    """A scalar as the kernels take it (a C float)."""
    return np.float64(np.float32(v))


@given(axis_case(), SCALARS, SCALARS, seeds())
def test_slice_reductions(rt, case, alpha, beta, seed):
    shape, tiles, axis = case
    rng = np.random.default_rng(seed)
    alpha, beta = f32(alpha), f32(beta)
    sshape, stiles = drop(shape, axis), drop(tiles, axis)
    x, b, s0 = rand(rng, shape), rand(rng, shape), rand(rng, sshape)
    tx, x64, ax = nl.from_numpy(x, tiles), x.astype(np.float64), abs(x.astype(np.float64))
    ulps = sum_ulps(shape, tiles, [axis % len(shape)])
    got = nl.ops.sum_slice(tx, axis).to_numpy()
    assert_close(got, x64.sum(axis), ax.sum(axis), ulps=ulps, what="sum_slice")
    out = nl.ops.sum_slice(tx, axis, nl.from_numpy(s0, stiles), alpha, beta)
    assert_close(out.to_numpy(), alpha * x64.sum(axis) + beta * s0,
                 abs(alpha) * ax.sum(axis) + abs(beta * s0), ulps=ulps, what="sum_slice β")
    out = nl.ops.sumsq_slice(tx, axis, nl.from_numpy(s0, stiles), alpha, beta)
    assert_close(out.to_numpy(), alpha * (x64**2).sum(axis) + beta * s0,
                 abs(alpha) * (x64**2).sum(axis) + abs(beta * s0), ulps=ulps + 1,
                 what="sumsq_slice")
    out = nl.ops.sumprod_slice(tx, nl.from_numpy(b, tiles), axis, alpha=alpha)
    assert_close(out.to_numpy(), alpha * (x64 * b).sum(axis),
                 abs(alpha) * abs(x64 * b).sum(axis), ulps=ulps + 1, what="sumprod_slice")
    # max is exact; -inf entries (masks) are ordinary values, even a fiber of them
    x[rng.random(shape) < 0.3] = -np.inf
    assert np.array_equal(nl.ops.max_slice(nl.from_numpy(x, tiles), axis).to_numpy(),
                          x.max(axis))


@given(axis_case(), SCALARS, SCALARS, seeds())
def test_fiber_and_global_sums(rt, case, alpha, beta, seed):
    shape, tiles, axis = case
    rng = np.random.default_rng(seed)
    alpha, beta = f32(alpha), f32(beta)
    x, f0 = rand(rng, shape), rand(rng, shape[axis])
    tx = nl.from_numpy(x, tiles)
    f = nl.ops.sum_fiber(tx, axis, nl.from_numpy(f0, (tiles[axis],)), alpha, beta)
    others = [d for d in range(len(shape)) if d != axis % len(shape)]
    assert_close(f.to_numpy(), alpha * fiber_sum(x, axis) + beta * f0,
                 abs(alpha) * fiber_sum(abs(x), axis) + abs(beta * f0),
                 ulps=sum_ulps(shape, tiles, others), what="sum_fiber")
    once = nl.ops.sum_fiber(tx, axis).to_numpy()  # a fixed order: bit-identical reruns
    assert np.array_equal(once, nl.ops.sum_fiber(tx, axis).to_numpy())
    ssq, alpha = float((x.astype(np.float64) ** 2).sum()), abs(alpha)  # (no cancellation)
    total = nl.ops.sumsq_all(tx, alpha=alpha)
    assert total.shape == (1,)
    every = sum_ulps(shape, tiles, range(len(shape))) + 1
    assert_close(total.to_numpy(), [alpha * ssq], ulps=every, what="sumsq_all")
    # gradient clipping: β = 1 accumulates over several tensors
    y = rand(rng, shape[::-1])
    nl.ops.sumsq_all(nl.from_numpy(y, tiles[::-1]), total, beta=1.0)
    assert_close(total.to_numpy(), [alpha * ssq + (y.astype(np.float64) ** 2).sum()],
                 ulps=2 * every, what="sumsq_all β")


@given(axis_case(), SCALARS, SCALARS, seeds())
def test_broadcasts(rt, case, alpha, beta, seed):
    shape, tiles, axis = case
    rng = np.random.default_rng(seed)
    alpha, beta = f32(alpha), f32(beta)
    a = axis % len(shape)
    x, s, f = rand(rng, shape), rand(rng, drop(shape, axis)), rand(rng, shape[axis])
    ts, tf = nl.from_numpy(s, drop(tiles, axis)), nl.from_numpy(f, (tiles[axis],))
    s_b = np.expand_dims(s.astype(np.float64), a)
    f_b = f.astype(np.float64).reshape([-1 if d == a else 1 for d in range(len(shape))])
    tx = nl.from_numpy(x, tiles)
    assert nl.ops.add_slice(ts, tx, axis, alpha, beta) is tx
    # y = α·b + β·x: two products and a sum (3 roundings); b·x: one
    assert_close(tx.to_numpy(), alpha * s_b + beta * x, abs(alpha * s_b) + abs(beta * x),
                 ulps=3, what="add_slice")
    got = nl.ops.mul_slice(ts, nl.from_numpy(x, tiles), axis).to_numpy()
    assert_close(got, s_b * x, ulps=1, what="mul_slice")
    got = nl.ops.add_fiber(tf, nl.from_numpy(x, tiles), axis, alpha, beta).to_numpy()
    assert_close(got, alpha * f_b + beta * x, abs(alpha * f_b) + abs(beta * x), ulps=3,
                 what="add_fiber")
    got = nl.ops.mul_fiber(tf, nl.from_numpy(x, tiles), axis).to_numpy()
    assert_close(got, f_b * x, ulps=1, what="mul_fiber")


def test_bad_inputs(rt1):
    x = nl.zeros((4, 6, 5), (2, 3, 5))
    with pytest.raises(ValueError, match=r"axis=3 is out of range .* use -3 … 2"):
        nl.ops.sum_slice(x, 3)
    with pytest.raises(ValueError, match=r"axis=-4 is out of range"):
        nl.ops.sum_fiber(x, -4)
    with pytest.raises(TypeError, match=r"axis must be an integer, got 1.0"):
        nl.ops.max_slice(x, 1.0)
    # a slice of x along axis 1 is (4, 5) with tiles (2, 5)
    with pytest.raises(ValueError, match=r"out is .*shape=\(4, 6\).* must have shape "
                                         r"\(4, 5\) with tile_shape \(2, 5\)"):
        nl.ops.sum_slice(x, 1, out=nl.zeros((4, 6), (2, 3)))
    with pytest.raises(ValueError, match=r"s is .*tile_shape=\(4, 5\).* tile_shape \(2, 5\)"):
        nl.ops.add_slice(nl.zeros((4, 5)), x, 1)
    with pytest.raises(ValueError, match=r"f is .*shape=\(5,\).* a fiber of x .* must have "
                                         r"shape \(6,\) with tile_shape \(3,\)"):
        nl.ops.add_fiber(nl.zeros((5,)), x, 1)
    with pytest.raises(ValueError, match=r"f is .*tile_shape=\(6,\).*tile_shape \(3,\)"):
        nl.ops.mul_fiber(nl.zeros((6,)), x, -2)
    with pytest.raises(ValueError, match=r"b is .* b \(like a .*\) must have shape \(4, 6, 5\)"):
        nl.ops.sumprod_slice(x, nl.zeros((4, 6, 5)), 0)
    with pytest.raises(ValueError, match=r"beta=1.0 accumulates into an existing out"):
        nl.ops.sum_slice(x, 0, beta=1.0)
    with pytest.raises(ValueError, match=r"out is .* the result of sumsq_all must have shape "
                                         r"\(1,\)"):
        nl.ops.sumsq_all(x, out=nl.zeros((2,)))
    with pytest.raises(TypeError, match=r"x must be float32, got int64"):
        nl.ops.sum_slice(nl.zeros((3,), dtype=np.int64), 0)
    with pytest.raises(TypeError, match=r"s must be a TiledTensor .*got ndarray"):
        nl.ops.mul_slice(np.zeros((4, 5), np.float32), x, 1)
