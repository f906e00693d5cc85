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

from nntile_lab.nn import backend
from nntile_lab.nn.attention import Attention
from nntile_lab.nn.backend import ops
from nntile_lab.nn.policy import StepPolicy


class KVCache:
    """K and V of each attention layer of ``model`` for ``batch`` rows and ``n_positions``
    positions: (B, H, P, D) tiled (batch tile, the layer's head tile, ``cache_tile``, D)."""

    def __init__(self, model, batch: int, n_positions: int, *, batch_tile: int | None = None,
                 cache_tile: int | None = None):
        positions = n_positions
        self.batch, self.n_positions = batch, n_positions
        self.batch_tile = batch if batch_tile is None else min(batch_tile, batch)
        self.cache_tile = positions if cache_tile is None else min(cache_tile, positions)
        self.layers: dict[int, tuple] = {}
        for _, m in model.named_modules():
            if isinstance(m, Attention):
                wk = m.projections[1].weight          # (E, n_kv_heads·D), whole heads per tile
                D = m.head_size
                shape = (batch, wk.shape[1] // D, positions, D)
                tiles = (self.batch_tile, wk.tile_shape[1] // D, self.cache_tile, D)
                self.layers[id(m)] = (backend.empty(shape, tiles), backend.empty(shape, tiles))
        self.pads = None          # (B,) int64: each row's left pads
        self.positions = None     # (B, t) int64 numpy: the running step's (rotary reads them)
        self.column = 0           # the first cache position the running step writes
        self._rope = None         # (key, (cos, sin)): the running step's rotary tables

    @property
    def tensors(self) -> list:
        return [t for kv in self.layers.values() for t in kv]

    def start(self, pads: np.ndarray) -> None:
        """A new batch: each row's left pads."""
        if self.pads is not None:
            self.pads.free()
        self.pads = backend.from_numpy(np.ascontiguousarray(pads, np.int64), (self.batch_tile,))

    def attend(self, layer, q, k, v, *, heads_first: bool = False):
        """One attention layer of the running step: its keys and values into the cache at
        ``column``, then the queries' attention over the cache up to each of them; q, k, v
        as the projections made them ((B, t, E) by whole heads, or (B, H, t, D) with
        ``heads_first``). Returns (B, t, E), heads merged."""
        kc, vc = self.layers[id(layer)]
        ops.kv_write(k, kc, self.column, heads_first=heads_first)
        ops.kv_write(v, vc, self.column, heads_first=heads_first)
        return ops.attend(q, kc, vc, self.pads, self.column, heads_first=heads_first)

    def rope(self, rotary, q):
        """Rotary tables (cos, sin) of the running step's cache columns column…column+t−1
        for q (B, H, t, D), made once per step and shared by its layers. A left-padded
        row's columns are its positions shifted by its pads — the same shift for its
        queries and keys — and rotary scores depend on positions only through their
        difference (R(m)ᵀR(n) = R(n−m)): one table gives every row its own positions'
        scores (Hugging Face's ``position_ids`` count from each row's first real token)."""
        key = (id(rotary), self.column, q.shape[2], q.tile_shape[2])
        if self._rope is None or self._rope[0] != key:
            self._free_rope()
            self._rope = (key, rotary.tables(q.shape[2], q.tile_shape[2], start=self.column))
        return self._rope[1]

    def _free_rope(self) -> None:
        if self._rope is not None:
            for t in self._rope[1]:
                t.free()
            self._rope = None

    def nbytes(self) -> int:
        return sum(4 * int(np.prod(t.shape)) for t in self.tensors)

    def free(self) -> None:
        for t in self.tensors:
            t.free()
        if self.pads is not None:
            self.pads.free()
        self._free_rope()
        self.layers, self.pads = {}, None


class Decoder:
    """``generate.loop``'s Decoder for a ``LanguageModel``: ``prefill(prompts)`` and
    ``step(tokens, column)`` run the model's own forward over the new positions in a
    generation step (``StepPolicy(cache=...)``: attention layers use the cache, the loss
    layer gives the last position's logits) and return them, (B, V) float32."""

    def __init__(self, model, batch: int, *, cache_tile: int | None = None):
        self.model = model
        c = model.config
        self.cache = KVCache(model, batch, c.n_positions, batch_tile=c.batch_tile,
                             cache_tile=cache_tile)
        self._pads = np.zeros(batch, np.int64)
        # decode steps submitted with the workers asleep (Runtime.workers_asleep); False
        # leaves them polling (scripts/decode_trace.py --compare times both)
        self.workers_asleep = True

    def prefill(self, prompts) -> np.ndarray:
        self.cache.start(prompts.pads)
        self._pads = prompts.pads
        T = prompts.ids.shape[1]
        return self._run(prompts.ids, prompts.positions(0, T), 0)

    def step(self, tokens, column: int) -> np.ndarray:
        pos = np.maximum(column - self._pads, 0)[:, None]
        return self._run(np.asarray(tokens, np.int64)[:, None], pos, column)

    def _run(self, ids: np.ndarray, pos: np.ndarray, column: int) -> np.ndarray:
        self.cache.column = column
        self.cache.positions = pos
        arrays = self.model.generation_inputs(np.ascontiguousarray(ids, np.int64),
                                              np.ascontiguousarray(pos, np.int64))
        policy = StepPolicy(self.model, training=False, cache=self.cache)
        if ids.shape[1] == 1 and self.workers_asleep:  # a decode step: ~150 tiny tasks,
            with backend.runtime().workers_asleep():   # submitted faster than spinning
                logits = self.model._forward(policy, arrays)   # workers let Python run
        else:
            logits = self.model._forward(policy, arrays)
        try:
            return logits.to_numpy()[:, 0, :]
        finally:
            logits.storage.free()

    def close(self) -> None:
        self.cache.free()
