"""float32 <-> bfloat16 conversions of tiled tensors, one task per tile (kernels/cpu/bf16.c).

A bf16 value is a float32 with its mantissa cut to 7 bits: ``to_bf16`` rounds to nearest,
ties to even (as PyTorch and ml_dtypes do; NaN stays NaN, values beyond bf16's largest,
3.39e38, become ±inf); ``to_f32`` is exact. A bf16 tensor has dtype
``nntile_lab.tensor.BFLOAT16`` (``ml_dtypes.bfloat16``): ``to_numpy`` gives such an array
and ``from_numpy`` takes one."""
from __future__ import annotations

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, same_layout
from nntile_lab.tensor import BFLOAT16, TiledTensor, empty


def _convert(x: TiledTensor, out: TiledTensor | None, src, dst, submit, op: str) -> TiledTensor:
    if not isinstance(x, TiledTensor):
        raise TypeError(f"{op}: x must be a TiledTensor, got {type(x).__name__}")
    need_dtype(x, src, f"{op}: x")
    if out is None:
        out = empty(x.shape, x.tile_shape, dst)
    else:
        need_dtype(out, dst, f"{op}: out")
        same_layout(x, out, names=f"{op}: out")
    hx, hy, sizes = x.handles, out.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(submit(hx[i], hy[i], sizes[i]))
    return out


def to_bf16(x: TiledTensor, out: TiledTensor | None = None) -> TiledTensor:
    """out[i] = bf16(x[i]): float32 rounded to bfloat16, to nearest, ties to even.

    ``out`` (bfloat16, shaped and tiled like ``x``) or None for a new tensor. Returns out."""
    return _convert(x, out, np.float32, BFLOAT16, lib.nl_submit_f32_to_bf16, "to_bf16")


def to_f32(x: TiledTensor, out: TiledTensor | None = None) -> TiledTensor:
    """out[i] = float32(x[i]): bfloat16 widened to float32 (exact).

    ``out`` (float32, shaped and tiled like ``x``) or None for a new tensor. Returns out."""
    return _convert(x, out, BFLOAT16, np.float32, lib.nl_submit_bf16_to_f32, "to_f32")
