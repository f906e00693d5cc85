"""Embedding lookup: rows of a table picked by token ids (or positions)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import ops
from nntile_lab.nn.module import Layer, Param, Record, normal

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor


class Embedding(Layer):
    """out[s, :] = W[ids[s], :], W of shape (n_rows, n_embd) tiled (row_tile, embd_tile),
    W ~ N(0, init_std²). The ids are an input without gradient."""

    @dataclass
    class Saved(Record):
        ids: TiledTensor        # int64: which rows the backward adds into

    def __init__(self, n_rows: int, n_embd: int, *, row_tile: int | None = None,
                 embd_tile: int | None = None, init_std: float = 0.02):
        super().__init__()
        self.weight = Param((n_rows, n_embd), (row_tile, embd_tile), init=normal(init_std))

    def forward(self, ctx: LeafContext, ids: TiledTensor):
        return ops.embedding(ids, self.weight.value), self.Saved(ids)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=None):
        """dW[ids[s]] += dy[s]; the ids have no gradient."""
        with ctx.weight_grads():
            ops.embedding_backward(saved.ids, dy, self.weight.grad)
        return None

    def own_flops_per_token(self, seq_len: int) -> float:
        return 0.0   # a lookup: no multiply-add (PaLM's count leaves it out)
