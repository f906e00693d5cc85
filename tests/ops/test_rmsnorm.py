"""RMS norm (Llama's) along any axis, forward and backward, against float64 references
(numpy; PyTorch's autograd for the gradients) over random shapes and tilings: the axis in one
tile (the fused *_tile kernels) or split over several (the passes that accumulate along it).
Every input is drawn from the test's own seed."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.test_reduce import axis_case, drop, fiber_sum
from tests.strategies import seeds
from tests.tolerance import U32 as U
from tests.tolerance import assert_close

SEEDS = seeds()


def axis_tiles(shape, tiles, a):
    return -(-shape[a] // tiles[a])


def inputs(rng, shape, tiles, axis, scale):
    a = axis % len(shape)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    w = (rng.standard_normal(shape[a]) * 0.5 + 1.0).astype(np.float32)
    return (x, w), (nl.from_numpy(x, tiles), nl.from_numpy(w, (tiles[a],)))


def bcast(v, a, ndim):
    return v.reshape([-1 if d == a else 1 for d in range(ndim)])


@given(axis_case(), SEEDS, st.sampled_from([1e-6, 0.5]), st.sampled_from([0.01, 3.0]),
       st.booleans())
def test_rms_norm(rt, case, seed, eps, scale, in_place):
    shape, tiles, axis = case
    a = axis % len(shape)
    (x, w), (tx, tw) = inputs(np.random.default_rng(seed), shape, tiles, axis, scale)
    y, inv_rms = nl.ops.rms_norm(tx, tw, axis, eps, out=tx if in_place else None)
    assert (y is tx) == in_place
    assert inv_rms.shape == drop(shape, axis) and inv_rms.tile_shape == drop(tiles, axis)
    x64 = x.astype(np.float64)
    r = 1 / np.sqrt((x64 * x64).mean(a) + eps)
    # mean x² sums positive terms in double, but is a float32 between the nt tiles of a split
    # axis (a rounding each, and 1/K's): r = 1/√v within half v's error plus its own rounding
    nt = axis_tiles(shape, tiles, a)
    r_err = ((nt + 1) / 2 + 1) * U
    assert_close(inv_rms.to_numpy(), r, ulps=r_err / U, what="inv_rms")
    want = x64 * np.expand_dims(r, a) * bcast(w, a, len(shape))
    # y = x·r·w: two more roundings per value
    assert_close(y.to_numpy(), want, ulps=(r_err + 2 * U) / U, what="y")


@given(axis_case(), SEEDS, st.sampled_from(["none", "all", "dweight"]),
       st.sampled_from([0.01, 3.0]))
def test_rms_norm_backward_vs_torch(rt, case, seed, given_grads, scale):
    torch = require("torch")
    shape, tiles, axis = case
    a = axis % len(shape)
    rng = np.random.default_rng(seed)
    (x, w), (tx, tw) = inputs(rng, shape, tiles, axis, scale)
    dy = rng.standard_normal(shape).astype(np.float32)
    eps = 1e-6
    # the definition itself in float64: y = x / √(mean x² + eps) · w (torch's autograd)
    xt, wt = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, w))
    xm = xt.movedim(a, -1)
    yt = xm * torch.rsqrt(xm.pow(2).mean(-1, keepdim=True) + eps) * wt
    yt.backward(torch.tensor(dy, dtype=torch.float64).movedim(a, -1))
    _, inv_rms = nl.ops.rms_norm(tx, tw, axis, eps)
    g0 = {"dx": rng.standard_normal(shape).astype(np.float32),
          "dweight": rng.standard_normal(shape[a]).astype(np.float32)}
    g0 = {"none": {}, "all": g0, "dweight": {"dweight": g0["dweight"]}}[given_grads]
    start = {name: nl.from_numpy(v, tiles if name == "dx" else (tiles[a],))
             for name, v in g0.items()}
    dx, dweight = nl.ops.rms_norm_backward(tx, nl.from_numpy(dy, tiles), tw, inv_rms, axis,
                                           **start)
    # dx = r·(g − xhat·mean(g·xhat)) cancels (to 0 along an axis of length 1): errors are
    # measured against the terms' magnitudes, as for layer norm. inv_rms's error (the
    # forward's, above) enters dx up to three times (r·g − r³·x·mean(g·x)); the sums are
    # float32 between the nt tiles of a split axis; dweight sums over every other tile too.
    x64 = x.astype(np.float64)
    r = 1 / np.sqrt((x64 * x64).mean(a, keepdims=True) + eps)
    xhat, g = abs(x64) * r, abs(dy * bcast(w, a, len(shape)))
    magnitude = {"dx": r * (g + xhat * (g * xhat).mean(a, keepdims=True)),
                 "dweight": fiber_sum(abs(dy) * xhat, a)}
    nt = axis_tiles(shape, tiles, a)
    r_err = ((nt + 1) / 2 + 1) * U
    tol = {"dx": 3 * r_err + (nt + 3) * U, "dweight": r_err + (tx.ntiles // nt + 3) * U}
    for name, got, want in (("dx", dx, xt.grad), ("dweight", dweight, wt.grad)):
        start_value = g0.get(name, 0)
        assert_close(got.to_numpy(), want.numpy() + start_value,
                     magnitude[name] + abs(start_value), ulps=tol[name] / U, what=name)
        if name in start:
            assert got is start[name]


def test_bad_inputs(rt1):
    x = nl.zeros((4, 6), (2, 3))
    w = nl.zeros((6,), (3,))
    with pytest.raises(ValueError, match=r"weight is .*tile_shape=\(6,\).* a fiber of x .* "
                                         r"must have shape \(6,\) with tile_shape \(3,\)"):
        nl.ops.rms_norm(x, nl.zeros((6,)))
    with pytest.raises(ValueError, match=r"eps=-1.0 must be ≥ 0"):
        nl.ops.rms_norm(x, w, eps=-1.0)
    with pytest.raises(ValueError, match=r"axis=2 is out of range"):
        nl.ops.rms_norm(x, w, axis=2)
    _, inv_rms = nl.ops.rms_norm(x, w)
    with pytest.raises(ValueError, match=r"inv_rms is .*shape=\(6,\).* a slice of x .* must "
                                         r"have shape \(4,\) with tile_shape \(2,\)"):
        nl.ops.rms_norm_backward(x, x, w, nl.zeros((6,), (3,)))
    dy = nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"dx is dy"):
        nl.ops.rms_norm_backward(x, dy, w, inv_rms, dx=dy)
    with pytest.raises(ValueError, match=r"dweight is weight"):
        nl.ops.rms_norm_backward(x, dy, w, inv_rms, dweight=w)
    with pytest.raises(ValueError, match=r"rms_norm: out is weight .* pass a separate out"):
        nl.ops.rms_norm(nl.zeros((6,), (3,)), w, out=w)
