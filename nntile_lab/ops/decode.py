"""Generation's ops on a KV cache (kernels/cpu/decode.c, docs/generation.md).

A cache tensor is (B, H, P, D): batch, heads, positions (``n_positions`` of them,
preallocated), head size; tiled (batch tile, head tile, cache tile, D). The model's
queries, keys and values come either as the projections' (B, t, E) output, E tiled by
whole heads (``ht·D``), or heads first (B, H, t, D) (``heads_first=True``): the kernels
read either through strides, so no permute task is needed.

- ``kv_write(x, cache, column)``: positions ``column … column + t − 1`` of the cache take
  ``x``'s t positions. One task per (x tile, cache tile) they share — a decode step (t = 1)
  touches one cache tile per (batch tile, head tile).
- ``attend(q, k_cache, v_cache, pads, column)``: causal attention of the t queries at
  positions ``column …`` over the cache's positions up to each query, left pads masked
  (grouped-query heads: a cache of fewer heads, each read by a group of query heads)
  (``generate.batching``); an online softmax over the cache tiles that hold those
  positions, one task per (query tile, cache tile), the last one normalising. The result
  is (B, t, E), heads merged, tiled like the projections' output: c_proj's input.
"""
from __future__ import annotations

import math

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias
from nntile_lab.tensor import TiledTensor, empty


def _layout(x: TiledTensor, heads_first: bool, D: int, what: str):
    """(B, t, H) of ``x`` and, per tile, (grid coords → (b, t, h) tile sizes and offsets,
    strides sb, st, sh in elements)."""
    need_dtype(x, "float32", what)
    if heads_first:
        if x.ndim != 4 or x.shape[3] != D or x.tile_shape[3] != D:
            raise ValueError(f"{what} must be (B, H, t, D={D}) with whole heads in each tile, "
                             f"got {x!r}")
        B, H, t, _ = x.shape
    else:
        if x.ndim != 3 or x.shape[2] % D or x.tile_shape[2] % D:
            raise ValueError(f"{what} must be (B, t, E) with E and its tile multiples of the "
                             f"head size {D} (whole heads per tile), got {x!r}")
        B, t, E = x.shape
        H = E // D
    return B, t, H


def _tile(x: TiledTensor, i: int, heads_first: bool, D: int):
    """(b, t, h) sizes, (b, t, h) offsets and (sb, st, sh) strides of tile ``i``."""
    shape, off = x.traits.tile_shapes[i], x.traits.tile_offsets[i]
    if heads_first:
        b, h, t, _ = shape
        return (b, t, h), (off[0], off[2], off[1]), (h * t * D, D, t * D)
    b, t, e = shape
    h = e // D
    return (b, t, h), (off[0], off[1], off[2] // D), (t * h * D, h * D, D)


def _check_cache(cache: TiledTensor, B: int, H: int, D: int, what: str) -> None:
    need_dtype(cache, "float32", what)
    if cache.ndim != 4 or cache.shape[:2] != (B, H) or cache.shape[3] != D \
            or cache.tile_shape[3] != D:
        raise ValueError(f"{what} must be (B={B}, H={H}, positions, D={D}) with whole heads of "
                         f"D values per tile, got {cache!r}")


def _cache_tiles(cache: TiledTensor):
    """Per position tile of the cache: its first position and its size."""
    P, cs = cache.shape[2], cache.tile_shape[2]
    return [(p0, min(cs, P - p0)) for p0 in range(0, P, cs)]


def _check_grid(x: TiledTensor, cache: TiledTensor, heads_first: bool, D: int,
                what: str, group: int = 1) -> None:
    """x's batch and head tiles must be the cache's (x's head tile ``group`` times the
    cache's: grouped-query heads)."""
    bt = x.tile_shape[0]
    ht = x.tile_shape[1] if heads_first else x.tile_shape[2] // D
    want = (cache.tile_shape[0], cache.tile_shape[1] * group)
    if (bt, ht) != want:
        groups = f" ({group} query heads per cache head)" if group > 1 else ""
        raise ValueError(f"{what} {x!r} has batch tile {bt} and head tile {ht}, the cache "
                         f"{cache!r} asks for {want}{groups}: they must be the same")


def kv_write(x: TiledTensor, cache: TiledTensor, column: int, *,
             heads_first: bool = False) -> TiledTensor:
    """cache[:, :, column + i, :] = x's position i (per head), i < t. Returns the cache."""
    D = cache.shape[3] if cache.ndim == 4 else 0
    B, t, H = _layout(x, heads_first, D, "kv_write: x")
    _check_cache(cache, B, H, D, "kv_write: cache")
    _check_grid(x, cache, heads_first, D, "kv_write: x")
    P = cache.shape[2]
    if not 0 <= column <= P - t:
        raise ValueError(f"kv_write: positions {column}…{column + t - 1} are outside the cache "
                         f"of {P} positions")
    no_alias("kv_write", {"cache": cache}, {"x": x})
    hx, hc, tc = x.handles, cache.handles, cache.traits
    ctiles = _cache_tiles(cache)
    for i in range(x.ntiles):
        (b, n, h), (b0, t0, h0), (sb, st, sh) = _tile(x, i, heads_first, D)
        lo, hi = column + t0, column + t0 + n            # cache positions written
        for ci, (p0, ps) in enumerate(ctiles):
            a, z = max(lo, p0), min(hi, p0 + ps)
            if a >= z:
                continue
            gc = tc.index((b0 // tc.tile_shape[0], h0 // tc.tile_shape[1], ci, 0))
            check(lib.nl_submit_kv_write(hx[i], hc[gc], b, h, D, sb, st, sh, a - lo, ps,
                                         a - p0, z - a))
    return cache


def attend(q: TiledTensor, k_cache: TiledTensor, v_cache: TiledTensor, pads: TiledTensor,
           column: int, *, heads_first: bool = False, scale: float | None = None,
           out: TiledTensor | None = None) -> TiledTensor:
    """y = softmax(mask(scale·q·Kᵀ))·V over the cache, heads merged: (B, t, E) tiled
    (batch tile, q's position tile, q's head tile·D). Query i is at position ``column + i``;
    ``pads`` (B,) int64, tiled like the batch, are each row's left pads. ``scale``
    defaults to 1/√D. Positions past a query are never read. Grouped-query heads: the
    caches may hold fewer heads than q, a divisor H_kv of q's H; query head j then reads
    cache head j // (H/H_kv) (Hugging Face's repeat_kv order), and q's head tile is the
    caches' times H/H_kv."""
    D = k_cache.shape[3] if k_cache.ndim == 4 else 0
    B, t, H = _layout(q, heads_first, D, "attend: q")
    Hkv = k_cache.shape[1] if k_cache.ndim == 4 and 1 <= k_cache.shape[1] <= H \
        and H % k_cache.shape[1] == 0 else H
    G = H // Hkv                       # query heads per key/value head
    for c, name in ((k_cache, "k_cache"), (v_cache, "v_cache")):
        _check_cache(c, B, Hkv, D, f"attend: {name}")
        _check_grid(q, c, heads_first, D, "attend: q", group=G)
    if v_cache.traits != k_cache.traits:
        raise ValueError(f"attend: v_cache {v_cache!r} must be tiled like k_cache {k_cache!r}")
    need_dtype(pads, "int64", "attend: pads")
    if pads.shape != (B,) or pads.tile_shape != (q.tile_shape[0],):
        raise ValueError(f"attend: pads must be (B={B},) tiled like the batch "
                         f"({q.tile_shape[0]}), got {pads!r}")
    P = k_cache.shape[2]
    if not 0 <= column <= P - t:
        raise ValueError(f"attend: query positions {column}…{column + t - 1} are outside the "
                         f"cache of {P} positions")
    scale = 1 / math.sqrt(D) if scale is None else float(scale)
    ht = k_cache.tile_shape[1] * G     # query heads per tile
    shape, tiles = (B, t, H * D), (q.tile_shape[0], q.tile_shape[2] if heads_first
                                   else q.tile_shape[1], ht * D)
    if out is None:
        out = empty(shape, tiles)
    elif out.shape != shape or out.tile_shape != tiles or out.dtype.name != "float32":
        raise ValueError(f"attend: out must be float32 {shape} tiled {tiles}, got {out!r}")
    no_alias("attend", {"out": out}, {"q": q, "k_cache": k_cache, "v_cache": v_cache})
    stats = empty((B, t, H, 2), (tiles[0], tiles[1], ht, 2))
    hq, hp, hk, hv, hy, hs = (q.handles, pads.handles, k_cache.handles, v_cache.handles,
                              out.handles, stats.handles)
    tc, ty = k_cache.traits, out.traits
    ctiles = _cache_tiles(k_cache)
    for i in range(q.ntiles):
        (b, n, h), (b0, t0, h0), (qb, qt, qh) = _tile(q, i, heads_first, D)
        gb, gt, gh = b0 // tiles[0], t0 // tiles[1], h0 // ht
        yi = ty.index((gb, gt, gh))
        last_pos = column + t0 + n - 1
        used = [ci for ci, (p0, _) in enumerate(ctiles) if p0 <= last_pos]
        for j, ci in enumerate(used):
            p0, ps = ctiles[ci]
            gc = tc.index((gb, gh, ci, 0))
            check(lib.nl_submit_attend(hq[i], hp[gb], hk[gc], hv[gc], hy[yi], hs[yi], b,
                                       h // G, G, D, n, ps, column + t0, p0, qb, qt, qh,
                                       n * h * D, h * D, D, scale, int(j == 0),
                                       int(j == len(used) - 1)))
    stats.free()
    return out


def take_position(x: TiledTensor, i: int, out: TiledTensor | None = None) -> TiledTensor:
    """out[:, 0, :] = x[:, i, :] for x (B, T, E): the one position a step's logits need,
    (B, 1, E) tiled (batch tile, 1, embedding tile). One task per tile of that column."""
    need_dtype(x, "float32", "take_position: x")
    if x.ndim != 3 or not 0 <= i < x.shape[1]:
        raise ValueError(f"take_position: position {i} of {x!r}, which must be (B, T, E) with "
                         f"T > {i}")
    shape, tiles = (x.shape[0], 1, x.shape[2]), (x.tile_shape[0], 1, x.tile_shape[2])
    if out is None:
        out = empty(shape, tiles)
    elif out.shape != shape or out.tile_shape != tiles:
        raise ValueError(f"take_position: out must be {shape} tiled {tiles}, got {out!r}")
    no_alias("take_position", {"out": out}, {"x": x})
    tx, to = x.traits, out.traits
    hx, ho = x.handles, out.handles
    gi = i // x.tile_shape[1]
    for gb in range(x.grid_shape[0]):
        for ge in range(x.grid_shape[2]):
            xi = tx.index((gb, gi, ge))
            b, t, e = tx.tile_shapes[xi]
            check(lib.nl_submit_kv_write(hx[xi], ho[to.index((gb, 0, ge))], b, 1, e, t * e, e,
                                         0, i - tx.tile_offsets[xi][1], 1, 0, 1))
    return out
