"""Embedding lookup and its backward: one task per (token tile, vocabulary tile) pair."""
from __future__ import annotations

from itertools import product

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias
from nntile_lab.tensor import TiledTensor, empty


def embedding(ids: TiledTensor, table: TiledTensor,
              out: TiledTensor | None = None) -> TiledTensor:
    """out[s, e] = table[ids[s], e].

    ``ids`` (int64, shape S, tiles St) picks rows of ``table`` (float32, (V, E),
    tiles (vt, et)); ``out`` has shape S + (E,) and tiles St + (et,). Each task
    copies the rows of one token tile whose ids fall in one vocabulary tile. An id
    outside [0, V) raises TaskError at the next wait.
    """
    out = _check(ids, table, out, "embedding", ("table", "out"))
    no_alias("embedding", {"out": out}, {"ids": ids, "table": table})
    for hi, ht, hr, args in _tasks(ids, table, out):
        check(lib.nl_submit_embedding(hi, ht, hr, *args))
    return out


def embedding_backward(ids: TiledTensor, dout: TiledTensor,
                       dtable: TiledTensor) -> TiledTensor:
    """dtable[ids[s], e] += dout[s, e] (scatter-add; accumulates into ``dtable``).

    Layouts as in ``embedding`` (``dout`` like its ``out``, ``dtable`` like its
    ``table``). Tasks adding into the same dtable tile run one after another in
    submission order (RW access), so the result is deterministic.
    """
    if dtable is None:
        raise ValueError("embedding_backward accumulates into dtable: pass a (V, E) tensor "
                         "(nl.zeros(table.shape, table.tile_shape) for a fresh gradient)")
    _check(ids, dtable, dout, "embedding_backward", ("dtable", "dout"))
    no_alias("embedding_backward", {"dtable": dtable}, {"ids": ids, "dout": dout})
    for hi, ht, hr, args in _tasks(ids, dtable, dout):
        check(lib.nl_submit_embedding_backward(hi, hr, ht, *args))
    return dtable


def _check(ids, table, rows, op, names):
    """Check dtypes and layouts; return ``rows`` (the S + (E,) tensor), new if None."""
    table_name, rows_name = names
    need_dtype(ids, "int64", f"{op}: ids")
    need_dtype(table, "float32", f"{op}: {table_name}")
    if table.ndim != 2:
        raise ValueError(f"{op}: {table_name} must be 2-D (vocabulary, embedding), got "
                         f"{table!r}")
    shape = ids.shape + table.shape[1:]
    tiles = ids.tile_shape + table.tile_shape[1:]
    if rows is None:
        return empty(shape, tiles)
    need_dtype(rows, "float32", f"{op}: {rows_name}")
    if rows.shape != shape or rows.tile_shape != tiles:
        raise ValueError(f"{op}: {rows_name} is {rows!r} but ids {ids!r} and {table_name} "
                         f"{table!r} need shape {shape} with tile_shape {tiles}")
    return rows


def _tasks(ids, table, rows):
    """(ids, table, rows) tile handles and kernel args of each task: one per (rows
    tile, vocabulary tile). The first vocabulary tile of the first embedding
    tile checks the ids, so a bad id is reported once per token tile."""
    hi, ht, hr = ids.handles, table.handles, rows.handles
    ti, tt, tr = ids.traits, table.traits, rows.traits
    vocab = table.shape[0]
    nv, ne = table.grid_shape
    for si, ei in product(range(ti.ntiles), range(ne)):
        ri = si * ne + ei  # rows' grid is ids' grid with the embedding axis appended
        n, e = ti.tile_sizes[si], tr.tile_shapes[ri][-1]
        for vi in range(nv):
            ki = vi * ne + ei
            voff, vrows = tt.tile_offsets[ki][0], tt.tile_shapes[ki][0]
            yield hi[si], ht[ki], hr[ri], (n, e, voff, vrows, vocab, int(vi == 0 and ei == 0))
