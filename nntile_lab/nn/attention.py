"""Causal multi-head self-attention, with grouped-query heads and rotary positions as
options (Llama).

Q, K, V and the attention output are (B, T, E) tensors tiled by whole heads (head_tile·D
along E), so the split E → (H, D) is a free view of the same tiles and one permute makes
the (B, H, T, D) layout the batched products want.

Grouped-query heads (``n_kv_head`` < ``n_head``): K and V have n_kv_head heads, each shared by
a group of G = n_head/n_kv_head consecutive query heads (Hugging Face's repeat_kv order). The
queries are viewed as (B, n_kv_head, G, T, D), a free split of their head axis, so every
product is batched over (B, n_kv_head) with the group's G·T query rows as one operand: K and
V are never repeated. Rotary positions (``rope_theta``): q and k turned by their tokens'
positions (``ops.rope``, Hugging Face's rotate-half convention) before the scores.

The forward and backward are split into steps a variant overrides, each beside its
backward: ``position`` (identity without rotary: GPT-2's positions are learned embeddings),
and ``core`` (the causal softmax attention). Keyword arguments given at the call
(``self.attn(x, cache=c)``) reach ``forward`` untouched.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nntile_lab.nn import backend
from nntile_lab.nn.backend import ops
from nntile_lab.nn.linear import Linear
from nntile_lab.nn.module import Layer, Record, tile
from nntile_lab.rotary import check_rope, rope_tables

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor

HEADS_FIRST = (0, 2, 1, 3)  # (B, T, H, D) ↔ (B, H, T, D)


class Attention(Layer):
    """y = c_proj(softmax(mask(q·kᵀ/√D))·v), q, k, v = x·W + b per head (D = E/H).

    ``head_tile`` counts query heads (the projections' output tiles are head_tile·D wide;
    with grouped-query heads a multiple of the group size G, K and V then tiled by
    head_tile/G heads); ``names`` name the four projections (their parameters' names:
    GPT-2's q, k, v and c_proj — joined into Hugging Face's c_attn by GPT-2's state mapping —
    or a Llama's q_proj, k_proj, v_proj, o_proj). ``proj_init_std``: c_proj's weight init.
    ``n_kv_head``: K and V heads (None: n_head). ``rope_theta``: rotary positions with this
    base (None: none), for sequences of up to ``n_positions`` tokens; or ``rotary``, a
    ``Rotary`` whose tables several layers share (a model's)."""

    @dataclass
    class Saved(Record):
        x: TiledTensor      # the input as kept (bf16 under a bf16 mode): the projections' dW
        q: TiledTensor      # (B, H, T, D), as kept
        k: TiledTensor
        v: TiledTensor
        # softmax(mask(q·kᵀ/√D)), float32 in every mode: softmax's backward reads it, and a
        # rounded row no longer sums to 1 — dscores = att·(datt − Σ att·datt) then no longer
        # sums to 0, an error dq = dscores·k turns into a bias, not noise
        att: TiledTensor
        y: TiledTensor      # att·v, heads merged (B, T, E), as kept: c_proj's input
        # rotary positions' cos and sin tables (the step's, shared by its layers), or None
        cos: TiledTensor | None = None
        sin: TiledTensor | None = None

    def __init__(self, n_embd: int, n_head: int, *, embd_tile: int | None = None,
                 head_tile: int | None = None, bias: bool = True, init_std: float = 0.02,
                 proj_init_std: float = 0.02, names=("q", "k", "v", "c_proj"),
                 n_kv_head: int | None = None, rope_theta: float | None = None,
                 n_positions: int | None = None, rotary: Rotary | None = None):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd={n_embd} is not divisible by n_head={n_head}")
        n_kv_head = n_head if n_kv_head is None else n_kv_head
        if not 1 <= n_kv_head <= n_head or n_head % n_kv_head:
            raise ValueError(f"n_head={n_head} is not a multiple of n_kv_head={n_kv_head}: "
                             "each key/value head serves a whole group of query heads "
                             f"(n_kv_head must divide n_head, e.g. one of "
                             f"{[h for h in range(1, n_head + 1) if n_head % h == 0]})")
        self.n_embd, self.n_head, self.head_size = n_embd, n_head, n_embd // n_head
        self.n_kv_head, self.group = n_kv_head, n_head // n_kv_head
        heads = tile(head_tile, n_head)
        if heads % self.group:
            raise ValueError(f"head_tile={heads} is not a multiple of the query group "
                             f"n_head/n_kv_head={self.group}: a tile of query heads must hold "
                             f"whole groups (use a multiple of {self.group})")
        if rotary is None and rope_theta is not None:
            rotary = Rotary(self.head_size, rope_theta, n_positions)
        if rotary is not None and rotary.head_size != self.head_size:
            raise ValueError(f"rotary tables of head size {rotary.head_size} given to an "
                             f"attention of head size {self.head_size}")
        self.rotary = rotary
        ht = heads * self.head_size                        # E tiled by whole heads
        kv = n_kv_head * self.head_size
        self.names = tuple(names)
        for name, width, out_tile in zip(self.names[:3], (n_embd, kv, kv),
                                         (ht, ht // self.group, ht // self.group)):
            setattr(self, name, Linear(n_embd, width, bias=bias, in_tile=embd_tile,
                                       out_tile=out_tile, init_std=init_std))
        setattr(self, self.names[3], Linear(n_embd, n_embd, bias=bias, in_tile=ht,
                                            out_tile=embd_tile, init_std=proj_init_std))

    @property
    def projections(self) -> tuple[Linear, Linear, Linear, Linear]:
        """The q, k, v and output projections."""
        return tuple(getattr(self, n) for n in self.names)

    def forward(self, ctx: LeafContext, x: TiledTensor, rope=None):
        """``rope``: rotary positions' (cos, sin) tables for these tokens (``Rotary.tables``:
        a model makes them once per step); None with rotary positions: made here."""
        wq, wk, wv, wo = self.projections
        wq.check_input(x)
        D = self.head_size
        xk = ctx.save_input(x)
        xg = ctx.operand(xk, fp32=x)
        qkv = [_heads(ctx.temp(lin.apply(xg)), D) for lin in (wq, wk, wv)]
        if self.rotary is not None and rope is None:
            rope = self.rotary.tables(qkv[0].shape[2], qkv[0].tile_shape[2])
        rope = tuple(getattr(t, "tensor", t) for t in rope) if rope is not None else (None, None)
        qkv[0], qkv[1] = self.position(ctx, qkv[0], qkv[1], *rope)
        qk, kk, vk = (ctx.keep(t) for t in qkv)
        q, k, v = (ctx.operand(tk, fp32=t) for tk, t in zip((qk, kk, vk), qkv))
        att = self.core(ctx, q, k)                          # (B, H, T, T), grouped
        y = ops.permute(self._merged(ctx.temp(ops.gemm(ctx.operand(att), v, batch_ndim=2))),
                        HEADS_FIRST).merge_axes(2)                     # (B, T, E)
        yk = ctx.keep(y)
        return wo.apply(ctx.operand(yk, fp32=y)), self.Saved(xk, qk, kk, vk, att, yk, *rope)

    def backward(self, ctx: LeafContext, saved: Saved, dout: TiledTensor, dx=None):
        wq, wk, wv, wo = self.projections
        D = self.head_size
        dy = ctx.temp(wo.grads(ctx, saved.y, dout))
        dheads = self._grouped(ctx.operand(ctx.temp(_heads(dy, D))))    # (B, H, T, D)
        datt = ctx.temp(ops.gemm(dheads, ctx.operand(saved.v), trans_b=True,
                                 batch_ndim=2))                         # datt = dheads·vᵀ
        dv = ops.gemm(ctx.operand(saved.att), dheads, trans_a=True, ndim=self._rows,
                      batch_ndim=2)                                     # dv = attᵀ·dheads
        dq, dk = self.core_backward(ctx, saved.q, saved.k, saved.att, datt)
        dq, dk = self.position_backward(ctx, dq, dk, saved.cos, saved.sin)
        x = ctx.operand(saved.x)                                        # widened once
        for d, lin in ((dq, wq), (dk, wk), (dv, wv)):
            dlin = ctx.temp(ops.permute(ctx.temp(d), HEADS_FIRST).merge_axes(2))  # (B, T, E)
            dx = lin.grads(ctx, x, dlin, dx=dx)
        return dx

    # ---- the steps a variant replaces ------------------------------------------------
    def position(self, ctx: LeafContext, q: TiledTensor, k: TiledTensor, cos=None, sin=None):
        """Positions applied to q and k (B, H, T, D): none without rotary; rotary turns each
        head's halves by its token's angle (``cos``, ``sin``: the tables' first T rows are
        the tokens'), in place."""
        if cos is None:
            return q, k
        return ops.rope(q, cos, sin, out=q), ops.rope(k, cos, sin, out=k)

    def position_backward(self, ctx: LeafContext, dq: TiledTensor, dk: TiledTensor, cos=None,
                          sin=None):
        """The rotation's transpose, in place."""
        if cos is None:
            return dq, dk
        return (ops.rope_backward(dq, cos, sin, dx=dq), ops.rope_backward(dk, cos, sin, dx=dk))

    def core(self, ctx: LeafContext, q: TiledTensor, k: TiledTensor) -> TiledTensor:
        """att = softmax(mask(q·kᵀ/√D)), causal, over the last axis; with grouped-query
        heads (B, n_kv_head, G, T, T)."""
        scores = ctx.temp(ops.gemm(self._grouped(q), k, trans_b=True, batch_ndim=2,
                                   alpha=1 / math.sqrt(q.shape[3])))
        ops.mask_causal(scores)
        return ops.softmax(scores, axis=scores.ndim - 1)

    def core_backward(self, ctx: LeafContext, q, k, att, datt):
        """dscores = softmax'(att)·datt; dq = dscores·k/√D; dk = dscoresᵀ·q/√D (softmax's
        backward in float32; the GEMMs' operands as the precision says); a group's queries
        all add into their key head's dk."""
        dscores = ctx.operand(ctx.temp(ops.softmax_backward(att, datt, axis=att.ndim - 1)))
        scale = 1 / math.sqrt(q.shape[3])
        q, k = self._grouped(ctx.operand(q)), ctx.operand(k)
        return (self._merged(ops.gemm(dscores, k, batch_ndim=2, alpha=scale)),
                ops.gemm(dscores, q, trans_a=True, ndim=self._rows, batch_ndim=2,
                         alpha=scale))

    # ---- grouped-query heads: views of the query side ---------------------------------
    @property
    def _rows(self) -> int:
        """The dimensions of a group's query rows: (G, T) grouped, (T,) otherwise."""
        return 2 if self.group > 1 else 1

    def _grouped(self, t: TiledTensor) -> TiledTensor:
        """(B, H, T, ·) → (B, n_kv_head, G, T, ·): a free split of the heads (none: G = 1)."""
        return t.split_axis(1, self.group) if self.group > 1 else t

    def _merged(self, t: TiledTensor) -> TiledTensor:
        """The inverse of ``_grouped``: (B, n_kv_head, G, T, ·) → (B, H, T, ·)."""
        return t.merge_axes(1) if self.group > 1 else t

    def own_flops_per_token(self, seq_len: int) -> float:
        """q·kᵀ and att·v: 2·T·E multiply-adds per token, ×3 with the backward (PaLM's
        12·E·T per layer, causal mask not discounted)."""
        return 12.0 * self.n_embd * seq_len


class Rotary:
    """Rotary positions' tables for a head size and base: ``tables(T, token_tile)`` gives new
    (cos, sin) tensors of the angles of positions 0…T−1 (``ops.rope_tables``: float64
    angles rounded once), (T, D/2) tiled like the tokens, from numpy arrays computed once.
    A model makes them once per step and its layers' records hold them for their backward
    (they are freed with the step, as any saved tensor)."""

    def __init__(self, head_size: int, theta: float, n_positions: int | None = None):
        check_rope(head_size, theta)
        self.head_size, self.theta, self.n_positions = head_size, float(theta), n_positions
        self._numpy: tuple | None = None

    def tables(self, n_tokens: int, token_tile: int):
        if self._numpy is None or self._numpy[0].shape[0] < n_tokens:
            rows = max(n_tokens, self.n_positions or 0)
            self._numpy = rope_tables(np.arange(rows), self.head_size, self.theta)
        tile_shape = (token_tile, self.head_size // 2)
        return tuple(backend.from_numpy(np.ascontiguousarray(t[:n_tokens]), tile_shape)
                     for t in self._numpy)

    def inputs(self, ids):
        """The step's tables for the tokens of ``ids`` (a (B, T) value of a model's forward),
        as inputs of the step's tape: held while the forward runs, then by the records
        that keep them."""
        t = ids.tensor
        cos, sin = self.tables(t.shape[1], t.tile_shape[1])
        return ids.tape.input(cos, "rope_cos"), ids.tape.input(sin, "rope_sin")


def _heads(y: TiledTensor, D: int) -> TiledTensor:
    """(B, T, E) → (B, H, T, D): a free split of E by heads, then one permute."""
    return ops.permute(y.split_axis(2, D), HEADS_FIRST)
