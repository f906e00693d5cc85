"""Generation's model side: a KV cache of tiled tensors and the decoder that runs a model's
layers over it (the loop, the sampler and the stop rules: ``nntile_lab.generate``).

The cache holds, for every attention layer, K and V as (B, H, P, D) tensors — batch,
heads, ``n_positions`` positions preallocated, head size — tiled (batch tile, head tile,
``cache_tile`` positions, D): a decode step writes one position (``ops.kv_write``) and
its attention reads the positions up to it (``ops.attend``), so its tasks touch the
tiles holding the new position and the prefix only. The left pads of each row
(``generate.batching``) sit beside the cache, and so does the column the current step
writes, which every attention layer of the step reads.

A step runs the model's trunk on the new positions only (the prompt at the prefill, one
token per row after), inside an inference scope (no saved records), then the head on each
row's last position: (B, 1, E) · Wᵀ → (B, 1, V) logits, the one thing read back.
"""
from __future__ import annotations

import numpy as np

from nntile_lab import ops
from nntile_lab.tensor import TiledTensor, empty, from_numpy


class KVCache:
    """K and V of every attention layer, for a batch of ``batch`` rows and ``positions``
    positions. ``shapes``: (n_head, head_size, head_tile) of each attention layer, in call
    order."""

    def __init__(self, shapes, batch: int, positions: int, *, batch_tile: int | None = None,
                 cache_tile: int | None = None):
        self.batch, self.positions = batch, positions
        self.batch_tile = batch if batch_tile is None else min(batch_tile, batch)
        self.cache_tile = positions if cache_tile is None else min(cache_tile, positions)
        self.k, self.v = [], []
        for n_head, head_size, head_tile in shapes:
            shape = (batch, n_head, positions, head_size)
            tiles = (self.batch_tile, head_tile, self.cache_tile, head_size)
            self.k.append(empty(shape, tiles))
            self.v.append(empty(shape, tiles))
        self.pads: TiledTensor | None = None
        self.column = 0          # the first position the running step writes
        self._next = 0           # the attention layer the running step reaches next

    def start(self, pads: np.ndarray) -> None:
        """A new batch: each row's left pads."""
        if self.pads is not None:
            self.pads.free()
        self.pads = from_numpy(np.ascontiguousarray(pads, np.int64), (self.batch_tile,))

    def begin_step(self, column: int) -> None:
        self.column, self._next = column, 0

    def next_layer(self) -> tuple[TiledTensor, TiledTensor]:
        """The (K, V) of the next attention layer of this step."""
        if self._next >= len(self.k):
            raise RuntimeError(f"the model called {self._next + 1} attention layers in one "
                               f"step; its cache has {len(self.k)}")
        i, self._next = self._next, self._next + 1
        return self.k[i], self.v[i]

    def nbytes(self) -> int:
        return sum(2 * 4 * int(np.prod(k.shape)) for k in self.k)

    def free(self) -> None:
        for t in (*self.k, *self.v):
            t.free()
        if self.pads is not None:
            self.pads.free()
        self.k, self.v, self.pads = [], [], None


def attend_cached(q: TiledTensor, k: TiledTensor, v: TiledTensor, cache: KVCache, *,
                  heads_first: bool = False) -> TiledTensor:
    """One attention layer of a generation step: this step's keys and values into the
    cache, then the queries' attention over the cache up to each of them. q, k, v as the
    projections made them ((B, t, E) by whole heads, or (B, H, t, D) with ``heads_first``);
    returns (B, t, E), heads merged."""
    kc, vc = cache.next_layer()
    ops.kv_write(k, kc, cache.column, heads_first=heads_first)
    ops.kv_write(v, vc, cache.column, heads_first=heads_first)
    return ops.attend(q, kc, vc, cache.pads, cache.column, heads_first=heads_first)


class Decoder:
    """``generate.loop``'s Decoder for a model: ``prefill(prompts)`` and ``step(tokens,
    column)`` return the (B, V) float32 logits of each row's last position. The model gives
    ``attention_shapes()``, ``cached_hidden(ids, pos, cache)`` (the trunk over the new
    positions, final norm included: (B, t, E)) and ``head_weight`` (the (V, E) matrix the
    logits come from)."""

    def __init__(self, model, batch: int, *, cache_tile: int | None = None):
        c = model.config
        self.model = model
        self.cache = KVCache(model.attention_shapes(), batch, c.n_positions,
                             batch_tile=c.batch_tile, cache_tile=cache_tile)
        self._pads = np.zeros(batch, np.int64)

    def prefill(self, prompts) -> np.ndarray:
        self.cache.start(prompts.pads)
        self._pads = prompts.pads
        T = prompts.ids.shape[1]
        return self._run(prompts.ids, prompts.positions(0, T), 0)

    def step(self, tokens, column: int) -> np.ndarray:
        pos = np.maximum(column - self._pads, 0)[:, None]
        return self._run(np.asarray(tokens, np.int64)[:, None], pos, column)

    def _run(self, ids: np.ndarray, pos: np.ndarray, column: int) -> np.ndarray:
        c = self.model.config
        B, t = ids.shape
        tiles = (c.tile("batch_tile", B), c.tile("seq_tile", t))
        self.cache.begin_step(column)
        with from_numpy(np.ascontiguousarray(ids), tiles) as tids, \
                from_numpy(np.ascontiguousarray(pos, np.int64), tiles) as tpos:
            x = self.model.cached_hidden(tids, tpos, self.cache)
            with x, ops.take_position(x, t - 1) as last:
                w = self.model.head_weight
                with ops.gemm(last, w, trans_b=True) as logits:     # (B, 1, V)
                    return logits.to_numpy()[:, 0, :]

    def close(self) -> None:
        self.cache.free()
