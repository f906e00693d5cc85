import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.test_reduce import axis_case, drop, fiber_sum, sum_ulps
from tests.strategies import seeds
from tests.tolerance import assert_close


def rand(rng, shape, scale=1.0, offset=0.0):
    return (rng.standard_normal(shape) * scale + offset).astype(np.float32)


def inputs(rng, shape, tiles, axis, offset):
    """x (values off-centre by ``offset``), gamma, beta and their tiled copies."""
    a = axis % len(shape)
    x, gamma, beta = (rand(rng, shape, 2.0, offset), rand(rng, shape[a], 0.5, 1.0),
                      rand(rng, shape[a]))
    ft = (tiles[a],)
    return (x, gamma, beta), (nl.from_numpy(x, tiles), nl.from_numpy(gamma, ft),
                              nl.from_numpy(beta, ft))


@given(axis_case(), st.sampled_from([0.0, 10.0]), st.sampled_from([1e-5, 0.5]), st.booleans(),
       seeds())
def test_layer_norm(rt, case, offset, eps, in_place, seed):
    shape, tiles, axis = case
    a = axis % len(shape)
    (x, gamma, beta), (tx, tg, tb) = inputs(np.random.default_rng(seed), shape, tiles, axis,
                                            offset)
    y, mean, inv_std = nl.ops.layer_norm(tx, tg, tb, axis, eps, out=tx if in_place else None)
    assert (y is tx) == in_place
    assert mean.shape == inv_std.shape == drop(shape, axis)
    assert mean.tile_shape == inv_std.tile_shape == drop(tiles, axis)
    x64 = x.astype(np.float64)
    mu, var = x64.mean(a), x64.var(a)  # biased variance, as PyTorch's layer norm
    mu_b, r_b = np.expand_dims(mu, a), 1 / np.sqrt(np.expand_dims(var, a) + eps)
    g_b, b_b = (v.reshape([-1 if d == a else 1 for d in range(len(shape))]) for v in (gamma, beta))
    # mean and x − mean are float32: y carries an error relative to (|x| + |mean|)·inv_std,
    # large against y itself where std ≪ |mean| (PyTorch's float32 layer norm alike); the
    # variance, relative to the mean of (|x| + |mean|)·|x − mean| (its terms' rounding)
    ulps = sum_ulps(shape, tiles, [a]) + 4
    assert_close(mean.to_numpy(), mu, abs(x64).mean(a), ulps=ulps, what="mean")
    spread = ((abs(x64) + abs(mu_b)) * abs(x64 - mu_b)).mean(a)
    assert_close(inv_std.to_numpy(), 1 / np.sqrt(var + eps),
                 (1 + spread / (var + eps)) / np.sqrt(var + eps), ulps=ulps, what="inv_std")
    assert_close(y.to_numpy(), (x64 - mu_b) * r_b * g_b + b_b,
                 (abs(x64) + abs(mu_b)) * r_b * abs(g_b) + abs(b_b), ulps=ulps, what="y")


@given(axis_case(), st.sampled_from([0.0, 10.0]), st.sampled_from(["none", "all", "dgamma"]),
       seeds())
def test_layer_norm_backward_vs_torch(rt, case, offset, given_grads, seed):
    torch = require("torch")
    shape, tiles, axis = case
    rng = np.random.default_rng(seed)
    a = axis % len(shape)
    (x, gamma, beta), (tx, tg, tb) = inputs(rng, shape, tiles, axis, offset)
    dy = rand(rng, shape)
    # torch normalises trailing dimensions: move the axis last
    t64 = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, gamma, beta)]
    xt, gt, bt = t64
    yt = torch.nn.functional.layer_norm(xt.movedim(a, -1), (shape[a],), gt, bt, 1e-5)
    yt.backward(torch.tensor(dy, dtype=torch.float64).movedim(a, -1))
    _, mean, inv_std = nl.ops.layer_norm(tx, tg, tb, axis)
    g0 = {name: rand(rng, s) for name, s in (("dx", shape), ("dgamma", shape[a]),
                                              ("dbeta", shape[a]))}
    if given_grads == "none":
        g0 = {}
    elif given_grads == "dgamma":
        g0 = {"dgamma": g0["dgamma"]}
    ft = (tiles[a],)
    start = {name: nl.from_numpy(v, tiles if name == "dx" else ft) for name, v in g0.items()}
    dx, dgamma, dbeta = nl.ops.layer_norm_backward(tx, nl.from_numpy(dy, tiles), tg, mean,
                                                   inv_std, axis, **start)
    # each gradient sums terms that may cancel (to exactly 0 along an axis of
    # length 1), and xhat = (x − mean)·inv_std carries an error relative to
    # (|x| + |mean|)·inv_std (float32 mean, as in the forward pass): measure the
    # errors against the terms' magnitudes, with xhat's as that
    x64 = x.astype(np.float64)
    r = 1 / np.sqrt(x64.var(a, keepdims=True) + 1e-5)
    xmag = (abs(x64) + abs(x64.mean(a, keepdims=True))) * r
    g = abs(dy * gamma.reshape([-1 if d == a else 1 for d in range(len(shape))]))
    mean_a = lambda v: v.mean(a, keepdims=True)  # noqa: E731
    magnitude = {"dx": r * (g + mean_a(g) + xmag * mean_a(g * xmag)),
                 "dgamma": fiber_sum(abs(dy) * xmag, a), "dbeta": fiber_sum(abs(dy), a)}
    others = [d for d in range(len(shape)) if d != a]
    for name, got, want in (("dx", dx, xt.grad), ("dgamma", dgamma, gt.grad),
                            ("dbeta", dbeta, bt.grad)):
        start_value = g0.get(name, 0)
        ulps = sum_ulps(shape, tiles, [a] if name == "dx" else others) + 8
        assert_close(got.to_numpy(), want.numpy() + start_value,
                     magnitude[name] + abs(start_value), ulps=ulps, what=name)
        if name in start:
            assert got is start[name]


def test_bad_inputs(rt1):
    x = nl.zeros((4, 6), (2, 3))
    g, b = nl.zeros((6,), (3,)), nl.zeros((6,), (3,))
    with pytest.raises(ValueError, match=r"gamma is .*tile_shape=\(6,\).* a fiber of x .* "
                                         r"must have shape \(6,\) with tile_shape \(3,\)"):
        nl.ops.layer_norm(x, nl.zeros((6,)), b)
    with pytest.raises(ValueError, match=r"beta is .*shape=\(4,\).*must have shape \(6,\)"):
        nl.ops.layer_norm(x, g, nl.zeros((4,)))
    with pytest.raises(ValueError, match=r"axis=-3 is out of range"):
        nl.ops.layer_norm(x, g, b, axis=-3)
    with pytest.raises(ValueError, match=r"eps=-1.0 must be ≥ 0"):
        nl.ops.layer_norm(x, g, b, eps=-1.0)
    _, mean, inv_std = nl.ops.layer_norm(x, g, b)
    with pytest.raises(ValueError, match=r"mean is .*shape=\(6,\).* a slice of x .* must have "
                                         r"shape \(4,\) with tile_shape \(2,\)"):
        nl.ops.layer_norm_backward(x, x, g, nl.zeros((6,), (3,)), inv_std)
    with pytest.raises(ValueError, match=r"dbeta is .* a fiber of x"):
        nl.ops.layer_norm_backward(x, x, g, mean, inv_std, dbeta=nl.zeros((6,)))
    dy = nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"dx is dy"):
        nl.ops.layer_norm_backward(x, dy, g, mean, inv_std, dx=dy)
    with pytest.raises(ValueError, match=r"dy is .*tile_shape=\(4, 6\).* dy \(like x"):
        nl.ops.layer_norm_backward(x, nl.zeros((4, 6)), g, mean, inv_std)
