"""Element-wise tiled ops that are not one codelet row each: ``fill`` and ``copy`` (a
kernel per dtype, ``fill`` ordered after another tensor), ``axpy``, and the backward of the
SiLU gate (two outputs). The others (``add``, ``scale``, ``mul``, the activations and their
backward, ``silu_gate``) are generated from the codelet table into
``nntile_lab.ops._generated``."""
from __future__ import annotations

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias, output, same_layout
from nntile_lab.ops._generated import add
from nntile_lab.tensor import BFLOAT16, TiledTensor


def fill(y: TiledTensor, value, after: TiledTensor | None = None) -> TiledTensor:
    """y[i] = value. Returns y. ``after`` (float32 or bfloat16: its values are never
    read): the fill waits for the tasks submitted so far that write ``after``'s last tile,
    so that ``y``'s tiles are created just before they are used (out of core they are not
    evicted as zeros)."""
    h, sizes = y.handles, y.traits.tile_sizes
    if y.dtype == BFLOAT16:
        raise TypeError("fill: y is bfloat16, which has no fill kernel: fill a float32 "
                        "tensor and convert it with ops.to_bf16")
    if after is not None:
        if after.dtype != BFLOAT16:   # the bf16 modes' logits gradient orders the head's
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
    """out[i] = x[i] (float32 or int64)."""
    if x.dtype == BFLOAT16:
        raise TypeError("copy: x is bfloat16, which has no copy kernel: convert it with "
                        "ops.to_f32 (exact) or copy the float32 tensor it came from")
    y = output(out, x)
    hx, hy, sizes = x.handles, y.handles, x.traits.tile_sizes
    need_dtype(y, x.dtype, "out")
    no_alias("copy", {"out": y}, {"x": x}, in_place=("x",))
    submit = lib.nl_submit_copy_i64 if x.dtype == np.int64 else lib.nl_submit_copy
    for i in range(x.ntiles):
        check(submit(hx[i], hy[i], sizes[i]))
    return y


def axpy(alpha: float, x: TiledTensor, y: TiledTensor) -> TiledTensor:
    """y[i] += α·x[i]. Returns y (``add`` with β = 1)."""
    return add(x, y, alpha, 1.0)


def silu_gate_backward(g: TiledTensor, u: TiledTensor, dy: TiledTensor,
                       dg: TiledTensor | None = None, du: TiledTensor | None = None,
                       beta: float = 0.0):
    """The gradients of ``silu_gate`` (y = silu(g)·u): returns (dg, du),
        dg = dy·u·silu'(g) + β·dg,   du = dy·silu(g) + β·du
    into the two tensors given, or two new ones when None (give both or neither; β = 0
    overwrites them, unread). dg and du may each be one of the inputs (in place: each value's
    g, u and dy are read before its dg and du are written), not each other."""
    for name, t in (("g", g), ("u", u), ("dy", dy)):
        need_dtype(t, np.float32, f"silu_gate_backward: {name}")
    same_layout(g, u, dy, names="silu_gate_backward")
    if (dg is None) != (du is None):
        raise ValueError("silu_gate_backward: give both dg and du, or neither (new ones); got "
                         f"dg={dg!r}, du={du!r}")
    if dg is None and beta != 0:
        raise ValueError(f"silu_gate_backward: beta={beta} accumulates into existing gradients: "
                         "pass dg= and du=")
    dg, du = output(dg, g, "silu_gate_backward: dg"), output(du, g, "silu_gate_backward: du")
    for name, t in (("dg", dg), ("du", du)):
        need_dtype(t, np.float32, f"silu_gate_backward: {name}")
    no_alias("silu_gate_backward", {"dg": dg, "du": du}, {"g": g, "u": u, "dy": dy},
             in_place=("g", "u", "dy"))
    hg, hu, hdy, hdg, hdu = g.handles, u.handles, dy.handles, dg.handles, du.handles
    sizes = g.traits.tile_sizes
    for i in range(g.ntiles):
        check(lib.nl_submit_silu_gate_backward(hg[i], hu[i], hdy[i], hdg[i], hdu[i], sizes[i],
                                               float(beta)))
    return dg, du
