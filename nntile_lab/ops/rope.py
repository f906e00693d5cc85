"""Rotary position embedding (Llama's), in Hugging Face's rotate-half convention.

Each head's D values are two halves x1, x2 of D/2; pair d of a token at position p turns by
the angle θ = p·rope_theta^(−2d/D):
    y1 = x1·cos θ − x2·sin θ,   y2 = x2·cos θ + x1·sin θ
and the backward is the rotation's transpose (θ → −θ). ``rope_tables`` gives cos θ and sin θ
for the tokens' positions (any: a generation step at an offset passes its own); the tiled ops
read them as (T, D/2) tensors tiled like x's tokens.
"""
from __future__ import annotations

import math

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, no_alias
from nntile_lab.ops.reduce import check_operand, like_out, tensor_in
from nntile_lab.tensor import TensorTraits, TiledTensor


def rope_tables(positions, head_size: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(cos θ, sin θ), float32 arrays of shape (len(positions), head_size/2), for the tokens
    at ``positions`` (non-negative integers): θ[t, d] = positions[t]·theta^(−2d/head_size).

    Computed in float64 and rounded once. Hugging Face's LlamaRotaryEmbedding computes the
    inverse frequencies and the angles in float32 (even in a float64 model), so its angles
    are off by up to |θ|·2⁻²⁴ from these; at short positions both agree to float32's
    precision."""
    if isinstance(head_size, bool) or not isinstance(head_size, int) or head_size < 2 \
            or head_size % 2:
        raise ValueError(f"head_size={head_size!r}: rotary positions turn pairs of values, so "
                         "the head size must be an even integer ≥ 2 (n_embd / n_head)")
    if not (isinstance(theta, (int, float)) and math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta={theta!r} must be a finite number > 0 (Llama: 10000 or "
                         "500000)")
    pos = np.asarray(positions)
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer) or (pos < 0).any():
        raise ValueError(f"positions must be a 1-D array of integers ≥ 0, got {pos!r}")
    inv_freq = float(theta) ** (-2.0 * np.arange(head_size // 2) / head_size)
    angle = pos.astype(np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def _check(x: TiledTensor, cos: TiledTensor, sin: TiledTensor, op: str, xname: str) -> int:
    """D/2, after checking x (…, T, D) with whole heads in its tiles and the tables"""
    tensor_in(x, xname)
    if x.ndim < 2:
        raise ValueError(f"{op}: {xname} is {x!r}; it needs (tokens, head size) axes at least")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"{op}: the head size {d} (x's last axis) is odd: rotary positions "
                         "turn pairs of values")
    if x.tile_shape[-1] != d:
        raise ValueError(f"{op}: {xname} is {x!r}: its last axis (a head, {d} values) must be "
                         f"whole in each tile (tile {x.tile_shape[-1]}): rotation pairs its "
                         "halves")
    want = TensorTraits((x.shape[-2], d // 2), (x.tile_shape[-2], d // 2))
    for name, t in (("cos", cos), ("sin", sin)):
        check_operand(t, want, name, f"the table of x's {x.shape[-2]} tokens (rope_tables), "
                                     f"tiled like x's tokens")
    return d // 2


def _rotate(submit, x, cos, sin, out, op, xname, outname):
    half = _check(x, cos, sin, op, xname)
    y = like_out(out, x, outname, xname)
    no_alias(op, {outname: y}, {xname: x, "cos": cos, "sin": sin}, in_place=(xname,))
    hx, hc, hs, hy = x.handles, cos.handles, sin.handles, y.handles
    tr = x.traits
    for i in range(x.ntiles):
        shape = tr.tile_shapes[i]
        t = tr.grid_index(i)[-2]       # the tables' tile of this tile's tokens
        check(submit(hx[i], hc[t], hs[t], hy[i], math.prod(shape[:-2]), shape[-2], half))
    return y


def rope(x: TiledTensor, cos: TiledTensor, sin: TiledTensor,
         out: TiledTensor | None = None) -> TiledTensor:
    """x (…, T, D) rotated: y1 = x1·cos − x2·sin, y2 = x2·cos + x1·sin on each head's halves;
    cos and sin (T, D/2) from ``rope_tables``, tiled like x's tokens; the heads (x's last
    axis) whole in each tile. ``out`` may be x. Returns out."""
    return _rotate(lib.nl_submit_rope, x, cos, sin, out, "rope", "x", "out")


def rope_backward(dy: TiledTensor, cos: TiledTensor, sin: TiledTensor,
                  dx: TiledTensor | None = None) -> TiledTensor:
    """The gradient of ``rope``: dx1 = dy1·cos + dy2·sin, dx2 = dy2·cos − dy1·sin (the
    rotation's transpose). ``dx`` may be dy. Returns dx."""
    return _rotate(lib.nl_submit_rope_backward, dy, cos, sin, dx, "rope_backward", "dy", "dx")
