"""Causal multi-head self-attention.

Q, K, V and the attention output are (B, T, E) tensors tiled by whole heads (head_tile·D
along E), so the split E → (H, D) is a free view of the same tiles and one permute makes
the (B, H, T, D) layout the batched products want.

The forward and backward are split into steps a variant overrides, each beside its
backward: ``position`` (identity here: GPT-2's positions are learned embeddings; rotary
positions replace it), the projections (``n_kv_head`` < ``n_head``, grouped-query heads, give
K and V fewer heads) and ``core`` (the causal softmax attention). Keyword arguments given
at the call (``self.attn(x, cache=c)``) reach ``forward`` untouched.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import ops
from nntile_lab.nn.linear import Linear
from nntile_lab.nn.module import Layer, Record, tile

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor

HEADS_FIRST = (0, 2, 1, 3)  # (B, T, H, D) ↔ (B, H, T, D)


class Attention(Layer):
    """y = c_proj(softmax(mask(q·kᵀ/√D))·v), q, k, v = x·W + b per head (D = E/H).

    ``head_tile`` counts heads (the projections' output tiles are head_tile·D wide);
    ``names`` name the four projections (their parameters' names: GPT-2's q, k, v and
    c_proj — joined into Hugging Face's c_attn by GPT-2's state mapping — or a Llama's
    q_proj, k_proj, v_proj, o_proj). ``proj_init_std``: c_proj's weight init."""

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

    def __init__(self, n_embd: int, n_head: int, *, embd_tile: int | None = None,
                 head_tile: int | None = None, bias: bool = True, init_std: float = 0.02,
                 proj_init_std: float = 0.02, names=("q", "k", "v", "c_proj")):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd={n_embd} is not divisible by n_head={n_head}")
        self.n_embd, self.n_head, self.head_size = n_embd, n_head, n_embd // n_head
        ht = tile(head_tile, n_head) * self.head_size      # E tiled by whole heads
        self.names = tuple(names)
        for name in self.names[:3]:
            setattr(self, name, Linear(n_embd, n_embd, bias=bias, in_tile=embd_tile,
                                       out_tile=ht, init_std=init_std))
        setattr(self, self.names[3], Linear(n_embd, n_embd, bias=bias, in_tile=ht,
                                            out_tile=embd_tile, init_std=proj_init_std))

    @property
    def projections(self) -> tuple[Linear, Linear, Linear, Linear]:
        """The q, k, v and output projections."""
        return tuple(getattr(self, n) for n in self.names)

    def forward(self, ctx: LeafContext, x: TiledTensor):
        wq, wk, wv, wo = self.projections
        wq.check_input(x)
        D = self.head_size
        xk = ctx.save_input(x)
        xg = ctx.operand(xk, fp32=x)
        qkv = [_heads(ctx.temp(lin.apply(xg)), D) for lin in (wq, wk, wv)]
        qkv[0], qkv[1] = self.position(ctx, qkv[0], qkv[1])
        qk, kk, vk = (ctx.keep(t) for t in qkv)
        q, k, v = (ctx.operand(tk, fp32=t) for tk, t in zip((qk, kk, vk), qkv))
        att = self.core(ctx, q, k)                                      # (B, H, T, T)
        y = ops.permute(ctx.temp(ops.gemm(ctx.operand(att), v, batch_ndim=2)),
                        HEADS_FIRST).merge_axes(2)                     # (B, T, E)
        yk = ctx.keep(y)
        return wo.apply(ctx.operand(yk, fp32=y)), self.Saved(xk, qk, kk, vk, att, yk)

    def backward(self, ctx: LeafContext, saved: Saved, dout: TiledTensor, dx=None):
        wq, wk, wv, wo = self.projections
        D = self.head_size
        dy = ctx.temp(wo.grads(ctx, saved.y, dout))
        dheads = ctx.operand(ctx.temp(_heads(dy, D)))                   # (B, H, T, D)
        datt = ctx.temp(ops.gemm(dheads, ctx.operand(saved.v), trans_b=True,
                                 batch_ndim=2))                         # datt = dheads·vᵀ
        dv = ops.gemm(ctx.operand(saved.att), dheads, trans_a=True,
                      batch_ndim=2)                                     # dv = attᵀ·dheads
        dq, dk = self.core_backward(ctx, saved.q, saved.k, saved.att, datt)
        dq, dk = self.position_backward(ctx, dq, dk)
        x = ctx.operand(saved.x)                                        # widened once
        for d, lin in ((dq, wq), (dk, wk), (dv, wv)):
            dlin = ctx.temp(ops.permute(ctx.temp(d), HEADS_FIRST).merge_axes(2))  # (B, T, E)
            dx = lin.grads(ctx, x, dlin, dx=dx)
        return dx

    # ---- the steps a variant replaces ------------------------------------------------
    def position(self, ctx: LeafContext, q: TiledTensor, k: TiledTensor):
        """Positions applied to q and k (B, H, T, D): none here (rotary: a rotation)."""
        return q, k

    def position_backward(self, ctx: LeafContext, dq: TiledTensor, dk: TiledTensor):
        return dq, dk

    def core(self, ctx: LeafContext, q: TiledTensor, k: TiledTensor) -> TiledTensor:
        """att = softmax(mask(q·kᵀ/√D)), causal, over the last axis."""
        scores = ctx.temp(ops.gemm(q, k, trans_b=True, batch_ndim=2,
                                   alpha=1 / math.sqrt(q.shape[3])))
        ops.mask_causal(scores)
        return ops.softmax(scores, axis=3)

    def core_backward(self, ctx: LeafContext, q, k, att, datt):
        """dscores = softmax'(att)·datt; dq = dscores·k/√D; dk = dscoresᵀ·q/√D (softmax's
        backward in float32; the GEMMs' operands as the precision says)."""
        dscores = ctx.operand(ctx.temp(ops.softmax_backward(att, datt, axis=3)))
        scale = 1 / math.sqrt(q.shape[3])
        q, k = ctx.operand(q), ctx.operand(k)
        return (ops.gemm(dscores, k, batch_ndim=2, alpha=scale),
                ops.gemm(dscores, q, trans_a=True, batch_ndim=2, alpha=scale))

    def own_flops_per_token(self, seq_len: int) -> float:
        """q·kᵀ and att·v: 2·T·E multiply-adds per token, ×3 with the backward (PaLM's
        12·E·T per layer, causal mask not discounted)."""
        return 12.0 * self.n_embd * seq_len


def _heads(y: TiledTensor, D: int) -> TiledTensor:
    """(B, T, E) → (B, H, T, D): a free split of E by heads, then one permute."""
    return ops.permute(y.split_axis(2, D), HEADS_FIRST)
