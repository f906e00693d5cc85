"""Rotary position embedding (Llama's), in Hugging Face's rotate-half convention.

Each head's D values are two halves x1, x2 of D/2; pair d of a token at position p turns by
the angle θ = p·rope_theta^(−2d/D):
    y1 = x1·cos θ − x2·sin θ,   y2 = x2·cos θ + x1·sin θ
and the backward is the rotation's transpose (θ → −θ). ``rope_tables`` gives cos θ and sin θ
for the tokens' positions (any: a generation step at an offset passes its own); the tiled ops
read them as (T, D/2) tensors tiled like x's tokens (or longer: the first T rows are read).
"""
from __future__ import annotations

import math

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, no_alias
from nntile_lab.ops.reduce import check_operand, like_out, tensor_in
from nntile_lab.rotary import rope_tables
from nntile_lab.tensor import TensorTraits, TiledTensor

__all__ = ["rope", "rope_backward", "rope_tables"]


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
    # the table's first T rows are the tokens' (a longer one: the positions 0…P−1 of a
    # model, used by sequences of any length up to P)
    rows = max(x.shape[-2], cos.shape[0]) if isinstance(cos, TiledTensor) else x.shape[-2]
    want = TensorTraits((rows, d // 2), (x.tile_shape[-2], d // 2))
    for name, t in (("cos", cos), ("sin", sin)):
        check_operand(t, want, name, f"the table of x's {x.shape[-2]} tokens (rope_tables: "
                                     f"at least {x.shape[-2]} rows), tiled like x's tokens")
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
