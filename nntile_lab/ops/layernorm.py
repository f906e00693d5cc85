"""Layer normalisation along an axis of a tiled tensor, and its backward pass
(see ``reduce`` for the (m, k, n) view of a tile, slices and fibers)."""
from __future__ import annotations

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, no_alias
from nntile_lab.ops.reduce import (
    check_fiber,
    check_operand,
    check_slice,
    fiber_out,
    like_out,
    norm_axis,
    plan,
    slice_out,
    slice_traits,
    sum_slice,
    tensor_in,
)
from nntile_lab.tensor import TiledTensor, empty


def layer_norm(x: TiledTensor, gamma: TiledTensor, beta: TiledTensor, axis: int = -1,
               eps: float = 1e-5, out: TiledTensor | None = None):
    """y = (x − mean)·inv_std·γ + β along ``axis``; returns (y, mean, inv_std).

    mean = mean_axis x, var = mean_axis (x − mean)² (biased, as PyTorch), inv_std =
    1/√(var + eps); mean and inv_std are slices of x (kept for the backward pass),
    γ (gamma) and β (beta) fibers. Two passes over x for the statistics (the
    centred sum of squares, accurate when |mean| ≫ std). When the axis fits in
    one tile, one task per tile does it all; split over several tiles, the mean,
    then 1/√(var + eps), accumulate tile after tile along the axis, and one task
    per tile normalises it.
    """
    tensor_in(x)
    axis = norm_axis(x, axis)
    check_fiber(gamma, x, axis, "gamma")
    check_fiber(beta, x, axis, "beta")
    if not eps >= 0:
        raise ValueError(f"eps={eps} must be ≥ 0")
    y = like_out(out, x, "out")
    mean, inv_std = slice_out(None, x, axis), slice_out(None, x, axis)
    hx, hg, hb, hy = x.handles, gamma.handles, beta.handles, y.handles
    hm, hr = mean.handles, inv_std.handles
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_layer_norm_tile(hx[t.x], hg[t.f], hb[t.f], hy[t.x], hm[t.s],
                                                hr[t.s], t.m, t.k, t.n, eps))
        return y, mean, inv_std
    inv_k = 1.0 / x.shape[axis]
    sum_slice(x, axis, mean, alpha=inv_k)
    for t in steps:
        check(lib.nl_submit_layer_norm_invstd(hx[t.x], hm[t.s], hr[t.s], t.m, t.k, t.n, inv_k,
                                              0.0 if t.first else 1.0, eps, t.last))
    for t in steps:
        check(lib.nl_submit_layer_norm_apply(hx[t.x], hm[t.s], hr[t.s], hg[t.f], hb[t.f],
                                             hy[t.x], t.m, t.k, t.n))
    return y, mean, inv_std


def layer_norm_backward(x: TiledTensor, dy: TiledTensor, gamma: TiledTensor,
                        mean: TiledTensor, inv_std: TiledTensor, axis: int = -1,
                        dx: TiledTensor | None = None, dgamma: TiledTensor | None = None,
                        dbeta: TiledTensor | None = None):
    """Gradients of ``layer_norm``; returns (dx, dgamma, dbeta), each accumulated
    into the tensor given, or new when None. With xhat = (x − mean)·inv_std and
    g = dy ⊙ γ:
        dbeta  += Σ dy,   dgamma += Σ dy ⊙ xhat   (over all but ``axis``)
        dx     += inv_std·(g − mean_axis g − xhat·mean_axis(g ⊙ xhat))
    dgamma and dbeta accumulate in tasks of their own, so that their chain over
    every tile of x stays off the path to dx.
    """
    tensor_in(x)
    axis = norm_axis(x, axis)
    check_operand(dy, x.traits, "dy", f"dy (like x {x!r})")
    check_fiber(gamma, x, axis, "gamma")
    check_slice(mean, x, axis, "mean")
    check_slice(inv_std, x, axis, "inv_std")
    # dgamma and dbeta read x and dy after dx is updated: no output may alias them
    no_alias("layer_norm_backward", {"dx": dx, "dgamma": dgamma, "dbeta": dbeta},
             {"x": x, "dy": dy, "gamma": gamma, "mean": mean, "inv_std": inv_std})
    beta_dx, beta_dg, beta_db = (0.0 if t is None else 1.0 for t in (dx, dgamma, dbeta))
    dx = like_out(dx, x, "dx")
    dgamma, dbeta = fiber_out(dgamma, x, axis, "dgamma"), fiber_out(dbeta, x, axis, "dbeta")
    hx, hdy, hg, hm, hr = x.handles, dy.handles, gamma.handles, mean.handles, inv_std.handles
    hdx, hdg, hdb = dx.handles, dgamma.handles, dbeta.handles
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_layer_norm_backward_tile(hx[t.x], hdy[t.x], hg[t.f], hm[t.s],
                                                         hr[t.s], hdx[t.x], t.m, t.k, t.n,
                                                         beta_dx))
    else:
        st = slice_traits(x, axis)  # the two slice means side by side in one tile
        sums = empty((2,) + st.shape, (2,) + st.tile_shape)
        hs = sums.handles
        inv_k = 1.0 / x.shape[axis]
        for t in steps:
            check(lib.nl_submit_layer_norm_backward_sums(hx[t.x], hdy[t.x], hg[t.f], hm[t.s],
                                                         hr[t.s], hs[t.s], t.m, t.k, t.n,
                                                         inv_k, 0.0 if t.first else 1.0))
        for t in steps:
            check(lib.nl_submit_layer_norm_backward_dx(hx[t.x], hdy[t.x], hg[t.f], hm[t.s],
                                                       hr[t.s], hs[t.s], hdx[t.x], t.m, t.k,
                                                       t.n, beta_dx))
        sums.free()
    for t in steps:
        check(lib.nl_submit_layer_norm_backward_fiber(hx[t.x], hdy[t.x], hm[t.s], hr[t.s],
                                                      hdg[t.f], hdb[t.f], t.m, t.k, t.n,
                                                      *((beta_dg, beta_db) if t.fiber_first
                                                        else (1.0, 1.0))))
    return dx, dgamma, dbeta
