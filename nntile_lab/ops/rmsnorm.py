"""RMS normalisation along an axis of a tiled tensor (Llama's), and its backward pass (see
``reduce`` for the (m, k, n) view of a tile, slices and fibers)."""
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
    tensor_in,
)
from nntile_lab.tensor import TiledTensor, empty


def rms_norm(x: TiledTensor, weight: TiledTensor, axis: int = -1, eps: float = 1e-6,
             out: TiledTensor | None = None):
    """y = x·inv_rms·w along ``axis``; returns (y, inv_rms).

    inv_rms = 1/√(mean_axis x² + eps), a slice of x (kept for the backward pass), summed in
    double; w (``weight``) is a fiber. When the axis fits in one tile, one task per tile
    does it all; split over several tiles, mean x² accumulates tile after tile along the
    axis (the last one finishes inv_rms), and one task per tile normalises it. ``out`` may
    be ``x``.
    """
    tensor_in(x)
    axis = norm_axis(x, axis)
    check_fiber(weight, x, axis, "weight")
    if not eps >= 0:
        raise ValueError(f"eps={eps} must be ≥ 0")
    y = like_out(out, x, "out")
    no_alias("rms_norm", {"out": y}, {"x": x, "weight": weight}, in_place=("x",))
    inv_rms = slice_out(None, x, axis)
    hx, hw, hy, hr = x.handles, weight.handles, y.handles, inv_rms.handles
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_rms_norm_tile(hx[t.x], hw[t.f], hy[t.x], hr[t.s], t.m, t.k,
                                              t.n, eps))
        return y, inv_rms
    inv_k = 1.0 / x.shape[axis]
    for t in steps:
        check(lib.nl_submit_rms_norm_invrms(hx[t.x], hr[t.s], t.m, t.k, t.n, inv_k,
                                            0.0 if t.first else 1.0, eps, t.last))
    for t in steps:
        check(lib.nl_submit_rms_norm_apply(hx[t.x], hr[t.s], hw[t.f], hy[t.x], t.m, t.k, t.n))
    return y, inv_rms


def rms_norm_backward(x: TiledTensor, dy: TiledTensor, weight: TiledTensor,
                      inv_rms: TiledTensor, axis: int = -1, dx: TiledTensor | None = None,
                      dweight: TiledTensor | None = None):
    """Gradients of ``rms_norm``; returns (dx, dweight), each accumulated into the tensor
    given, or new when None. With r = inv_rms, xhat = x·r and g = dy ⊙ w:
        dweight += Σ dy ⊙ xhat   (over all but ``axis``)
        dx      += r·(g − xhat·mean_axis(g ⊙ xhat))
    dweight accumulates in tasks of its own, so that its chain over every tile of x stays
    off the path to dx.
    """
    tensor_in(x)
    axis = norm_axis(x, axis)
    check_operand(dy, x.traits, "dy", f"dy (like x {x!r})")
    check_fiber(weight, x, axis, "weight")
    check_slice(inv_rms, x, axis, "inv_rms")
    # dweight reads x and dy after dx is updated: no output may alias them
    no_alias("rms_norm_backward", {"dx": dx, "dweight": dweight},
             {"x": x, "dy": dy, "weight": weight, "inv_rms": inv_rms})
    beta_dx, beta_dw = (0.0 if t is None else 1.0 for t in (dx, dweight))
    dx = like_out(dx, x, "dx")
    dweight = fiber_out(dweight, x, axis, "dweight")
    hx, hdy, hw, hr = x.handles, dy.handles, weight.handles, inv_rms.handles
    hdx, hdw = dx.handles, dweight.handles
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_rms_norm_backward_tile(hx[t.x], hdy[t.x], hw[t.f], hr[t.s],
                                                       hdx[t.x], t.m, t.k, t.n, beta_dx))
    else:
        st = slice_traits(x, axis)
        sums = empty(st.shape, st.tile_shape)      # mean_axis(g ⊙ xhat)
        hs = sums.handles
        inv_k = 1.0 / x.shape[axis]
        for t in steps:
            check(lib.nl_submit_rms_norm_backward_sums(hx[t.x], hdy[t.x], hw[t.f], hr[t.s],
                                                       hs[t.s], t.m, t.k, t.n, inv_k,
                                                       0.0 if t.first else 1.0))
        for t in steps:
            check(lib.nl_submit_rms_norm_backward_dx(hx[t.x], hdy[t.x], hw[t.f], hr[t.s],
                                                     hs[t.s], hdx[t.x], t.m, t.k, t.n,
                                                     beta_dx))
        sums.free()
    for t in steps:
        check(lib.nl_submit_rms_norm_backward_fiber(hx[t.x], hdy[t.x], hr[t.s], hdw[t.f], t.m,
                                                    t.k, t.n,
                                                    beta_dw if t.fiber_first else 1.0))
    return dx, dweight
