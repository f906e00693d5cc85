"""Tiled matrix product, batched over leading dimensions."""
from __future__ import annotations

import math
from itertools import product

import numpy as np

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias
from nntile_lab.tensor import BFLOAT16, TiledTensor, empty
from nntile_lab.tiling import TensorTraits


def gemm(a: TiledTensor, b: TiledTensor, *, trans_a: bool = False, trans_b: bool = False,
         alpha: float = 1.0, beta: float = 0.0, out: TiledTensor | None = None,
         ndim: int = 1, batch_ndim: int = 0, out_dtype=None) -> TiledTensor:
    """c[β.., m.., n..] = α · Σ_k op(a)[β.., m.., k..] · op(b)[β.., k.., n..] + β·c.

    ``ndim`` trailing dimensions of op(a) are contracted with as many leading ones
    of op(b) (after the ``batch_ndim`` batch dimensions, which lead every operand).
    op(a) swaps a's m and k groups when ``trans_a`` (a is stored β.., k.., m..);
    likewise op(b) is stored β.., n.., k.. when ``trans_b``. One task per
    (c tile, k tile) pair; the first k tile applies β, the rest accumulate.

    a and b both float32 (OpenBLAS sgemm) or both bfloat16 (oneDNN: bf16 products summed
    in float32); c is float32, or with ``out_dtype=BFLOAT16`` (or a bf16 ``out``) bf16:
    the float32 sums rounded once when stored, ``beta`` 0 only (the bf16 modes' logits,
    docs/precision.md). A bfloat16 ``a`` with a float32 ``b`` (and c) is widened, exactly,
    inside each task and multiplied by sgemm (bf16-storage's head backward).
    """
    if b.dtype == BFLOAT16 and a.dtype != BFLOAT16:
        raise TypeError(f"gemm: a is {a.dtype.name} and b is {b.dtype.name}: a bf16 "
                        "product needs both in bfloat16 (convert with ops.to_bf16)")
    mixed = a.dtype == BFLOAT16 and b.dtype != BFLOAT16
    c_dtype = np.dtype(out.dtype if out is not None else out_dtype or np.float32)
    if out is not None and out_dtype is not None and np.dtype(out_dtype) != c_dtype:
        raise TypeError(f"gemm: out is {c_dtype.name} but out_dtype={np.dtype(out_dtype).name}: "
                        "give one of them")
    if mixed and c_dtype != np.float32:
        raise TypeError(f"gemm: a bfloat16 a with a {b.dtype.name} b makes a float32 c, not "
                        f"{c_dtype.name}: convert b with ops.to_bf16 for a bf16 c")
    if c_dtype == BFLOAT16:
        if beta != 0:
            raise ValueError(f"gemm: beta={beta} with a bfloat16 c: a bf16 result is written, "
                             "never accumulated into; use a float32 out to accumulate")
        submit = _bf16_c_submit(a.dtype)
    elif c_dtype == np.float32:
        submit = (lib.nl_submit_gemm_a16 if mixed else lib.nl_submit_gemm_bf16
                  if a.dtype == BFLOAT16 else lib.nl_submit_gemm)
    else:
        raise TypeError(f"gemm: c must be float32 or bfloat16, got {c_dtype.name}")
    for t, name in ((a, "a"), (b, "b")):
        if t.dtype != BFLOAT16:
            need_dtype(t, "float32", name)
        if t.ndim < batch_ndim + ndim:
            raise ValueError(f"{name} has {t.ndim} dimensions, fewer than batch_ndim + ndim "
                             f"= {batch_ndim + ndim}")
    if ndim < 1 or batch_ndim < 0:
        raise ValueError(f"ndim={ndim} must be ≥ 1 and batch_ndim={batch_ndim} ≥ 0")
    shape, tiles, nk, tasks = _plan(a, b, trans_a, trans_b, ndim, batch_ndim)
    if c_dtype == BFLOAT16 and nk > 1:   # a second k tile would add to a rounded c
        raise ValueError(f"gemm: a bfloat16 c needs the contracted dimensions in one tile "
                         f"(their float32 sums stay inside one task); a has {nk} tiles "
                         "there: give them one tile, or use a float32 out")
    if out is None:
        if beta != 0:
            raise ValueError(f"beta={beta} accumulates into an existing result: pass out=")
        c = empty(shape, tiles, c_dtype)
    else:
        c = out
        if c.shape != shape or c.tile_shape != tiles:
            raise ValueError(f"out is {c!r} but the product needs shape {shape} with "
                             f"tile_shape {tiles}")
    no_alias("gemm", {"out": c}, {"a": a, "b": b})
    ha, hb, hc = a.handles, b.handles, c.handles
    for ia, ib, ic, batch, m, n, k, first in tasks:
        check(submit(ha[ia], hb[ib], hc[ic], batch, m, n, k, trans_a, trans_b, alpha,
                     beta if first else 1.0))
    return c


# The task list of a product of two layouts, made once: a decode step multiplies the same
# few layouts ~25 times, and planning the tiles costs more than submitting them
_PLANS: dict = {}


def _plan(a: TiledTensor, b: TiledTensor, trans_a: bool, trans_b: bool, ndim: int,
          batch_ndim: int):
    """c's shape and tiles, the number of k tiles and the tasks: (a tile, b tile, c
    tile, batch, m, n, k, first k tile) in submission order, c tile by c tile."""
    key = (a.traits, b.traits, trans_a, trans_b, ndim, batch_ndim)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    nb, nm, nn = batch_ndim, a.ndim - batch_ndim - ndim, b.ndim - batch_ndim - ndim
    ga = _groups(a, nb, nm, ndim, trans_a)       # (batch, m, k) dims of a
    gb = _groups(b, nb, ndim, nn, trans_b)       # (batch, k, n) dims of b
    _match(ga[0], gb[0], a, b, "batch")
    _match(ga[2], gb[1], a, b, "contracted (k)")
    shape = tuple(a.shape[d] for d in ga[0] + ga[1]) + tuple(b.shape[d] for d in gb[2])
    tiles = tuple(a.tile_shape[d] for d in ga[0] + ga[1]) + tuple(b.tile_shape[d] for d in gb[2])
    nk = math.prod(a.grid_shape[d] for d in ga[2])
    ta, tb = a.traits, b.traits
    tc = TensorTraits(shape, tiles)
    # a flat tile number is Σ index·stride: split it into the part fixed by the c
    # tile and the part that walks the k tiles
    kidxs = list(product(*(range(a.grid_shape[d]) for d in ga[2])))
    ka = [_flat(kidx, ta.grid_strides, ga[2]) for kidx in kidxs]
    kb = [_flat(kidx, tb.grid_strides, gb[1]) for kidx in kidxs]
    ksize = [math.prod(ta.tile_shapes[ka[j]][d] for d in ga[2]) for j in range(len(kidxs))]
    tasks = []
    for ci in range(tc.ntiles):
        cidx, cshape = tc.grid_index(ci), tc.tile_shapes[ci]
        a0 = _flat(cidx[:nb + nm], ta.grid_strides, ga[0] + ga[1])
        b0 = _flat(cidx[:nb] + cidx[nb + nm:], tb.grid_strides, gb[0] + gb[2])
        batch = math.prod(cshape[:nb])
        m, n = math.prod(cshape[nb:nb + nm]), math.prod(cshape[nb + nm:])
        tasks += [(a0 + ka[j], b0 + kb[j], ci, batch, m, n, ksize[j], j == 0)
                  for j in range(len(kidxs))]
    if len(_PLANS) >= 1024:
        _PLANS.clear()
    plan = _PLANS[key] = (shape, tiles, nk, tasks)
    return plan


def _bf16_c_submit(ab_dtype):
    """The submit helper of a product stored in bf16, as ``nl_submit_gemm``'s signature
    (its ``beta`` is always 0 here: one k tile)."""
    row = lib.nl_submit_gemm_bf16_c16 if ab_dtype == BFLOAT16 else lib.nl_submit_gemm_c16

    def submit(ha, hb, hc, batch, m, n, k, trans_a, trans_b, alpha, beta):
        return row(ha, hb, hc, batch, m, n, k, trans_a, trans_b, alpha)
    return submit


def _flat(index, strides, dims) -> int:
    """Σ index[i]·strides[dims[i]]: a partial flat tile number."""
    return sum(i * strides[d] for i, d in zip(index, dims))


def _groups(t: TiledTensor, nb: int, n1: int, n2: int, swap: bool):
    """Dimension indices of (batch, first group, second group) of op(t)."""
    batch = tuple(range(nb))
    g1, g2 = tuple(range(nb, nb + n1)), tuple(range(nb + n1, nb + n1 + n2))
    if swap:  # stored as batch, second group, first group
        g2, g1 = tuple(range(nb, nb + n2)), tuple(range(nb + n2, nb + n2 + n1))
    return batch, g1, g2


def _match(da, db, a, b, what: str) -> None:
    sa, sb = tuple(a.shape[d] for d in da), tuple(b.shape[d] for d in db)
    ta, tb = tuple(a.tile_shape[d] for d in da), tuple(b.tile_shape[d] for d in db)
    if sa != sb or ta != tb:
        raise ValueError(f"gemm {what} dimensions differ: a has sizes {sa} tiles {ta}, "
                         f"b has sizes {sb} tiles {tb}; they must be equal")
