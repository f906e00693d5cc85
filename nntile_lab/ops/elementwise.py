"""Element-wise tiled ops: one task per tile. ``x``, ``y`` ... share shape and tiles."""
from __future__ import annotations

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias, output, same_layout
from nntile_lab.tensor import TiledTensor


def fill(y: TiledTensor, value, after: TiledTensor | None = None) -> TiledTensor:
    """y[i] = value. Returns y. ``after`` (float32): the fill waits for the tasks
    submitted so far that write ``after``'s last tile, so that ``y``'s tiles are
    created just before they are used (out of core they are not evicted as zeros)."""
    h, sizes = y.handles, y.traits.tile_sizes
    if after is not None:
        need_dtype(after, np.float32, "after")
        need_dtype(y, np.float32, "y")
        trigger = after.handles[after.ntiles - 1]
        for i in range(y.ntiles):
            check(lib.nl_submit_fill_after(trigger, h[i], sizes[i], value))
    else:
        submit = lib.nl_submit_fill_i64 if y.dtype == np.int64 else lib.nl_submit_fill
        for i in range(y.ntiles):
            check(submit(h[i], sizes[i], value))
    y.storage.dropped = False
    return y


def copy(x: TiledTensor, out: TiledTensor | None = None) -> TiledTensor:
    """out[i] = x[i]."""
    y = output(out, x)
    hx, hy, sizes = x.handles, y.handles, x.traits.tile_sizes
    need_dtype(y, x.dtype, "out")
    no_alias("copy", {"out": y}, {"x": x}, in_place=("x",))
    submit = lib.nl_submit_copy_i64 if x.dtype == np.int64 else lib.nl_submit_copy
    for i in range(x.ntiles):
        check(submit(hx[i], hy[i], sizes[i]))
    return y


def add(x: TiledTensor, y: TiledTensor, alpha: float = 1.0, beta: float = 1.0) -> TiledTensor:
    """y[i] = α·x[i] + β·y[i], in place (β = 0 overwrites y). Returns y. ``axpy`` is β = 1."""
    same_layout(x, y, names="add")
    no_alias("add", {"y": y}, {"x": x}, in_place=("x",))
    hx, hy, sizes = x.handles, y.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_axpby(hx[i], hy[i], sizes[i], alpha, beta))
    return y


def axpy(alpha: float, x: TiledTensor, y: TiledTensor) -> TiledTensor:
    """y[i] += α·x[i]. Returns y."""
    return add(x, y, alpha, 1.0)


def scale(x: TiledTensor, alpha: float, out: TiledTensor | None = None) -> TiledTensor:
    """out[i] = α·x[i]."""
    y = output(out, x)
    no_alias("scale", {"out": y}, {"x": x}, in_place=("x",))
    hx, hy, sizes = x.handles, y.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_scale(hx[i], hy[i], sizes[i], alpha))
    return y


def mul(a: TiledTensor, b: TiledTensor, out: TiledTensor | None = None,
        alpha: float = 1.0) -> TiledTensor:
    """out[i] = α·a[i]·b[i]."""
    same_layout(a, b, names="mul")
    y = output(out, a)
    no_alias("mul", {"out": y}, {"a": a, "b": b}, in_place=("a", "b"))
    ha, hb, hy, sizes = a.handles, b.handles, y.handles, a.traits.tile_sizes
    for i in range(a.ntiles):
        check(lib.nl_submit_mul(ha[i], hb[i], hy[i], sizes[i], alpha))
    return y


def gelu(x: TiledTensor, out: TiledTensor | None = None) -> TiledTensor:
    """out[i] = x[i]/2 · (1 + tanh(√(2/π)·(x[i] + 0.044715·x[i]³)))  (GPT-2's GELU)."""
    y = output(out, x)
    no_alias("gelu", {"out": y}, {"x": x}, in_place=("x",))
    hx, hy, sizes = x.handles, y.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_gelu(hx[i], hy[i], sizes[i]))
    return y


def gelu_backward(x: TiledTensor, dy: TiledTensor, dx: TiledTensor | None = None,
                  beta: float = 0.0) -> TiledTensor:
    """dx[i] = dy[i]·gelu'(x[i]) + β·dx[i] (β = 0: a new or overwritten dx)."""
    same_layout(x, dy, names="gelu_backward")
    dx = output(dx, x, "dx")
    no_alias("gelu_backward", {"dx": dx}, {"x": x, "dy": dy}, in_place=("x", "dy"))
    hx, hdy, hdx, sizes = x.handles, dy.handles, dx.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_gelu_backward(hx[i], hdy[i], hdx[i], sizes[i], beta))
    return dx
