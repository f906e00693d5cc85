"""Layout ops: causal masking and axis permutation, one task per tile."""
from __future__ import annotations

import math

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias
from nntile_lab.tensor import TiledTensor, empty

MAX_PERMUTE_NDIM = 6  # the kernel's loop nest


def mask_causal(x: TiledTensor, value: float = float("-inf")) -> TiledTensor:
    """x[..., i, j] = value where j > i (global indices), in place. Returns x.

    The last two axes are (Tq, Tk) with Tq == Tk; tiles entirely on or below the
    diagonal get no task.
    """
    need_dtype(x, "float32", "mask_causal: x")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"mask_causal needs x with ≥ 2 axes, the last two equal "
                         f"(query, key), got {x!r}")
    hx, tx = x.handles, x.traits
    for i in range(tx.ntiles):
        *lead, m, n = tx.tile_shapes[i]
        row0, col0 = tx.tile_offsets[i][-2:]
        if col0 + n - 1 <= row0:  # every column ≤ every row: nothing to mask
            continue
        check(lib.nl_submit_mask_causal(hx[i], math.prod(lead), m, n, row0, col0, value))
    return x


def permute(x: TiledTensor, perm, out: TiledTensor | None = None) -> TiledTensor:
    """out = numpy.transpose(x, perm): out[i_perm[0], …] = x[i_0, …], tiles permuted
    likewise (out.tile_shape[k] = x.tile_shape[perm[k]]). One task per tile."""
    need_dtype(x, "float32", "permute: x")
    perm = tuple(perm)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"permute: perm={perm} must be a permutation of 0..{x.ndim - 1} "
                         f"for {x!r}")
    if x.ndim > MAX_PERMUTE_NDIM:
        raise ValueError(f"permute handles up to {MAX_PERMUTE_NDIM} axes, x has {x.ndim}")
    shape = tuple(x.shape[d] for d in perm)
    tiles = tuple(x.tile_shape[d] for d in perm)
    if out is None:
        out = empty(shape, tiles)
    else:
        need_dtype(out, "float32", "permute: out")
        if out.shape != shape or out.tile_shape != tiles:
            raise ValueError(f"permute: out is {out!r} but perm={perm} of {x!r} needs shape "
                             f"{shape} with tile_shape {tiles}")
    no_alias("permute", {"out": out}, {"x": x})
    hx, hy, tx, ty = x.handles, out.handles, x.traits, out.traits
    pad = MAX_PERMUTE_NDIM - x.ndim
    for i in range(tx.ntiles):
        xshape, gidx = tx.tile_shapes[i], tx.grid_index(i)
        strides = [math.prod(xshape[d + 1:]) for d in range(x.ndim)]
        sizes = [1] * pad + [xshape[d] for d in perm]
        steps = [0] * pad + [strides[d] for d in perm]
        yi = ty.index(tuple(gidx[d] for d in perm))
        check(lib.nl_submit_permute(hx[i], hy[yi], *sizes, *steps))
    return out
