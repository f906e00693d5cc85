"""The language-model head and its loss: logits = x·Wᵀ, loss = cross-entropy(logits, labels)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import ops
from nntile_lab.nn.module import Layer, Param, Record, normal

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor


class LMHead(Layer):
    """loss = mean over tokens of cross_entropy(x·Wᵀ, labels), W of shape (vocab_size,
    n_embd). ``weight``: tie it to an embedding's table (pass its ``Param``: GPT-2), or
    None for a head of its own (tiles ``vocab_tile`` × ``embd_tile``, N(0, init_std²)).

    A loss layer: its forward returns the loss, and in a training step computes
    ∂loss/∂logits (times the step's ``grad_scale``) with it — the cross-entropy kernels
    make both in one pass — so the B·T·V logits are dead when the forward ends; under a
    bf16 mode both are stored in bf16 (``Casts.logits_dtype``)."""

    is_loss = True

    @dataclass
    class Saved(Record):
        x: TiledTensor                  # the input as kept (bf16 under a bf16 mode)
        dlogits: TiledTensor | None     # ∂loss/∂logits (training steps only)

    def __init__(self, n_embd: int, vocab_size: int, *, weight: Param | None = None,
                 embd_tile: int | None = None, vocab_tile: int | None = None,
                 init_std: float = 0.02):
        super().__init__()
        if weight is None:
            weight = Param((vocab_size, n_embd), (vocab_tile, embd_tile), init=normal(init_std))
        elif weight.shape != (vocab_size, n_embd):
            raise ValueError(f"LMHead({n_embd}, {vocab_size}) is tied to a parameter of shape "
                             f"{weight.shape}, not ({vocab_size}, {n_embd})")
        weight.gemm = True   # the head's GEMMs read it: a bf16 copy under bf16
        self.weight = weight

    def forward(self, ctx: LeafContext, x: TiledTensor, labels: TiledTensor):
        self.expect(x, "inputs", size=self.weight.shape[1], tile=self.weight.tile_shape[1])
        if ctx.cache is not None:       # a generation step: the next token's logits
            return self.logits(ctx, x), None
        xk = ctx.save_input(x)
        # the kept copy, as the backward's dW reads it: the logits see the same input
        xg = ctx.operand(xk)
        logits = ctx.temp(ops.gemm(xg, self.weight.operand, trans_b=True,
                                   out_dtype=ctx.casts.logits_dtype(xg)))    # (B, T, V)
        loss, dlogits = ops.cross_entropy(logits, labels, grad=ctx.training,
                                          grad_scale=ctx.grad_scale)
        return loss, self.Saved(xk, dlogits)

    def logits(self, ctx: LeafContext, x: TiledTensor) -> TiledTensor:
        """logits = x[:, −1]·Wᵀ, (B, 1, V) float32: the next token's, from each row's last
        position only (generation; the labels are not read)."""
        last = (x if x.shape[1] == 1 else                   # a decode step: x is it
                ctx.temp(ops.take_position(x, x.shape[1] - 1)))              # (B, 1, E)
        return ops.gemm(ctx.operand(last), self.weight.operand, trans_b=True)

    def backward(self, ctx: LeafContext, saved: Saved, dy=None, dx=(None, None)):
        """dx (+)= dlogits·W; dW += dlogitsᵀ·x (the labels: no gradient)."""
        dx = dx[0]
        dlogits = ctx.casts.head_gradient(saved.dlogits, ctx)
        dx = ops.gemm(dlogits, self.weight.operand, out=dx, beta=0.0 if dx is None else 1.0)
        with ctx.weight_grads():
            x = ctx.operand(saved.x)
            ops.gemm(dlogits, x, trans_a=True, ndim=x.ndim - 1, beta=1.0, out=self.weight.grad)
        return dx, None

    def backward_trigger(self, record: Saved):
        return record.dlogits
