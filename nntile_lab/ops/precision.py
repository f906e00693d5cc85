"""float32 <-> bfloat16 conversions of tiled tensors, one task per tile (kernels/cpu/bf16.c),
and GELU with bf16 storage (kernels/cpu/gelu_bf16.c), the bf16 precision modes' MLP.

A bf16 value is a float32 with its mantissa cut to 7 bits: ``to_bf16`` rounds to nearest,
ties to even (as PyTorch and ml_dtypes do; NaN stays NaN, values beyond bf16's largest,
3.39e38, become ±inf); ``to_f32`` is exact. A bf16 tensor has dtype
``nntile_lab.tensor.BFLOAT16`` (``ml_dtypes.bfloat16``): ``to_numpy`` gives such an array
and ``from_numpy`` takes one."""
from __future__ import annotations

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias, same_layout
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


def _tensor(x, what: str) -> None:
    if not isinstance(x, TiledTensor):
        raise TypeError(f"{what} must be a TiledTensor, got {type(x).__name__}")


def gelu_bf16(x: TiledTensor) -> tuple[TiledTensor, TiledTensor]:
    """``(bf16(x), bf16(gelu(x)))`` from a float32 ``x`` in one pass, no float32 output:
    the MLP's hidden tile as the bf16 modes keep it and its GELU as the next GEMM reads
    it (the GELU of ``ops.gelu``, rounded to nearest even). Two new bfloat16 tensors
    shaped and tiled like ``x``."""
    _tensor(x, "gelu_bf16: x")
    need_dtype(x, np.float32, "gelu_bf16: x")
    xk, out = empty(x.shape, x.tile_shape, BFLOAT16), empty(x.shape, x.tile_shape, BFLOAT16)
    hx, hk, ho, sizes = x.handles, xk.handles, out.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_gelu_bf16(hx[i], hk[i], ho[i], sizes[i]))
    return xk, out


def gelu_backward_bf16(x: TiledTensor, dy: TiledTensor, dx: TiledTensor | None = None,
                       beta: float = 0.0) -> TiledTensor:
    """dx[i] = dy[i]·gelu'(x[i]) + β·dx[i] with ``x`` bfloat16 (as ``gelu_bf16`` kept it,
    widened exactly in the kernel), ``dy`` and ``dx`` float32 (β = 0: a new or overwritten
    dx). ``ops.gelu_backward`` of ``to_f32(x)`` without the float32 copy. Returns dx."""
    for t, what in ((x, "x"), (dy, "dy")):
        _tensor(t, f"gelu_backward_bf16: {what}")
    need_dtype(x, BFLOAT16, "gelu_backward_bf16: x")
    need_dtype(dy, np.float32, "gelu_backward_bf16: dy")
    same_layout(x, dy, names="gelu_backward_bf16: dy")
    if dx is None:
        dx, beta = empty(x.shape, x.tile_shape), 0.0
    else:
        _tensor(dx, "gelu_backward_bf16: dx")
        need_dtype(dx, np.float32, "gelu_backward_bf16: dx")
        same_layout(x, dx, names="gelu_backward_bf16: dx")
        no_alias("gelu_backward_bf16", {"dx": dx}, {"dy": dy}, in_place=("dy",))
    hx, hdy, hdx, sizes = x.handles, dy.handles, dx.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_gelu_backward_bf16(hx[i], hdy[i], hdx[i], sizes[i], float(beta)))
    return dx


def silu_gate_bf16(g: TiledTensor, u: TiledTensor) -> tuple[TiledTensor, TiledTensor,
                                                              TiledTensor]:
    """``(bf16(g), bf16(u), bf16(silu(g)·u))`` from float32 ``g`` and ``u`` in one pass, no
    float32 output: SwiGLU's inputs as the bf16 modes keep them and its output as the next
    GEMM reads it (``ops.silu_gate``'s values, rounded to nearest even). Three new bfloat16
    tensors shaped and tiled like ``g``."""
    for t, what in ((g, "g"), (u, "u")):
        _tensor(t, f"silu_gate_bf16: {what}")
        need_dtype(t, np.float32, f"silu_gate_bf16: {what}")
    same_layout(g, u, names="silu_gate_bf16: u")
    gk, uk, out = (empty(g.shape, g.tile_shape, BFLOAT16) for _ in range(3))
    hg, hu, hgk, huk, ho = g.handles, u.handles, gk.handles, uk.handles, out.handles
    sizes = g.traits.tile_sizes
    for i in range(g.ntiles):
        check(lib.nl_submit_silu_gate_bf16(hg[i], hu[i], hgk[i], huk[i], ho[i], sizes[i]))
    return gk, uk, out


def silu_gate_backward_bf16(g: TiledTensor, u: TiledTensor, dy: TiledTensor,
                            dg: TiledTensor | None = None, du: TiledTensor | None = None,
                            beta: float = 0.0) -> tuple[TiledTensor, TiledTensor]:
    """``ops.silu_gate_backward`` with ``g`` and ``u`` bfloat16 (as ``silu_gate_bf16`` kept
    them, widened exactly in the kernel), ``dy``, ``dg`` and ``du`` float32: dg = dy·u·silu'(g)
    + β·dg, du = dy·silu(g) + β·du, into both given or two new ones. Returns (dg, du)."""
    for t, what in ((g, "g"), (u, "u"), (dy, "dy")):
        _tensor(t, f"silu_gate_backward_bf16: {what}")
    need_dtype(g, BFLOAT16, "silu_gate_backward_bf16: g")
    need_dtype(u, BFLOAT16, "silu_gate_backward_bf16: u")
    need_dtype(dy, np.float32, "silu_gate_backward_bf16: dy")
    same_layout(g, u, dy, names="silu_gate_backward_bf16")
    if (dg is None) != (du is None):
        raise ValueError("silu_gate_backward_bf16: give both dg and du, or neither")
    if dg is None:
        if beta != 0:
            raise ValueError(f"silu_gate_backward_bf16: beta={beta} accumulates into existing "
                             "gradients: pass dg= and du=")
        dg, du = empty(g.shape, g.tile_shape), empty(g.shape, g.tile_shape)
    for t, what in ((dg, "dg"), (du, "du")):
        _tensor(t, f"silu_gate_backward_bf16: {what}")
        need_dtype(t, np.float32, f"silu_gate_backward_bf16: {what}")
        same_layout(g, t, names=f"silu_gate_backward_bf16: {what}")
    no_alias("silu_gate_backward_bf16", {"dg": dg, "du": du}, {"dy": dy}, in_place=("dy",))
    hg, hu, hdy, hdg, hdu = g.handles, u.handles, dy.handles, dg.handles, du.handles
    sizes = g.traits.tile_sizes
    for i in range(g.ntiles):
        check(lib.nl_submit_silu_gate_backward_bf16(hg[i], hu[i], hdy[i], hdg[i], hdu[i],
                                                    sizes[i], float(beta)))
    return dg, du
