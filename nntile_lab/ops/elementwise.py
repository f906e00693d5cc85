"""Element-wise tiled ops that are not one codelet row each: ``fill`` and ``copy`` (a
kernel per dtype, ``fill`` ordered after another tensor) and ``axpy``. The others
(``add``, ``scale``, ``mul``, the activations and their backward) are generated from the
codelet table into ``nntile_lab.ops._generated``."""
from __future__ import annotations

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias, output
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
