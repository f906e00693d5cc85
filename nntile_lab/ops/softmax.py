"""Softmax along an axis of a tiled tensor, and its backward pass (see
``reduce`` for the (m, k, n) view of a tile, slices and fibers)."""
from __future__ import annotations

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, no_alias
from nntile_lab.ops.reduce import (
    check_operand,
    like_out,
    max_slice,
    norm_axis,
    plan,
    slice_out,
    slice_traits,
    tensor_in,
)
from nntile_lab.tensor import TiledTensor, empty


def softmax(x: TiledTensor, axis: int, out: TiledTensor | None = None) -> TiledTensor:
    """out = exp(x − max_axis x) / Σ_axis exp(x − max_axis x)  (out may be x).

    -inf entries (causal masks) give 0; no fiber may be -inf all along the axis.
    When the axis fits in one tile, one task per tile does it all. Split over
    several tiles: a max pass (``max_slice``), a pass summing exp(x − max) tile
    after tile along the axis, then one task per tile normalising it.
    """
    tensor_in(x)
    axis = norm_axis(x, axis)
    y = like_out(out, x, "out")
    no_alias("softmax", {"out": y}, {"x": x}, in_place=("x",))
    hx, hy = x.handles, y.handles
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_softmax_tile(hx[t.x], hy[t.x], t.m, t.k, t.n))
        return y
    mx = max_slice(x, axis)
    sums = slice_out(None, x, axis)
    hm, hs = mx.handles, sums.handles
    for t in steps:
        check(lib.nl_submit_softmax_sumexp(hx[t.x], hm[t.s], hs[t.s], t.m, t.k, t.n,
                                           0.0 if t.first else 1.0))
    for t in steps:
        check(lib.nl_submit_softmax_apply(hx[t.x], hm[t.s], hs[t.s], hy[t.x], t.m, t.k, t.n))
    mx.free()
    sums.free()
    return y


def softmax_backward(y: TiledTensor, dy: TiledTensor, axis: int,
                     dx: TiledTensor | None = None) -> TiledTensor:
    """dx = y ⊙ (dy − Σ_axis dy ⊙ y), accumulated into ``dx`` when given (a new
    tensor otherwise); y is softmax's output.

    The sum is divided by Σ_axis y (1 but for rounding), so that dx sums to 0
    along the axis as the true gradient does (see kernels/cpu/norm.c).
    """
    tensor_in(y, "y")
    axis = norm_axis(y, axis)
    check_operand(dy, y.traits, "dy", f"dy (like y {y!r})")
    beta = 0.0 if dx is None else 1.0
    dx = like_out(dx, y, "dx", "y")
    no_alias("softmax_backward", {"dx": dx}, {"y": y, "dy": dy}, in_place=("y", "dy"))
    hy, hdy, hdx = y.handles, dy.handles, dx.handles
    steps = plan(y.traits, axis)
    if y.grid_shape[axis] == 1:
        for t in steps:
            check(lib.nl_submit_softmax_backward_tile(hy[t.x], hdy[t.x], hdx[t.x], t.m, t.k,
                                                      t.n, beta))
        return dx
    st = slice_traits(y, axis)  # both sums as float pairs hi, lo (see norm.c) in one tile
    sums = empty((4,) + st.shape, (4,) + st.tile_shape)
    hs = sums.handles
    for t in steps:
        check(lib.nl_submit_softmax_backward_sums(hy[t.x], hdy[t.x], hs[t.s], t.m, t.k, t.n,
                                                  not t.first))
    for t in steps:
        check(lib.nl_submit_softmax_backward(hy[t.x], hdy[t.x], hs[t.s], hdx[t.x], t.m, t.k,
                                             t.n, beta))
    sums.free()
    return dx
