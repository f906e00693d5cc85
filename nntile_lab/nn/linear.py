"""Linear layer: y = x·W + b over the last axis (W stored (in, out), as GPT-2's Conv1D)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import ops
from nntile_lab.nn.module import Layer, Param, Record, normal, zeros

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor


class Linear(Layer):
    """y[..., j] = Σ_i x[..., i]·W[i, j] + b[j]. ``in_tile``/``out_tile``: the tiles of the
    input's and output's last axis (None: whole). ``init_std``: W ~ N(0, init_std²); b = 0."""

    @dataclass
    class Saved(Record):
        x: TiledTensor      # the input as kept (bf16 under a bf16 mode): dW = xᵀ·dy

    def __init__(self, n_in: int, n_out: int, *, bias: bool = True, in_tile: int | None = None,
                 out_tile: int | None = None, init_std: float = 0.02):
        super().__init__()
        self.n_in, self.n_out = n_in, n_out
        self.weight = Param((n_in, n_out), (in_tile, out_tile), init=normal(init_std),
                            gemm=True)
        self.bias = Param((n_out,), (out_tile,), init=zeros) if bias else None

    def forward(self, ctx: LeafContext, x: TiledTensor):
        self.check_input(x)
        xk = ctx.save_input(x)
        return self.apply(ctx.operand(xk, fp32=x)), self.Saved(xk)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=None):
        return self.grads(ctx, saved.x, dy, dx)

    # ---- the math, also called by layers holding Linears (Attention) -----------------
    def check_input(self, x: TiledTensor) -> None:
        self.expect(x, "inputs", size=self.n_in, tile=self.weight.tile_shape[0])

    def apply(self, x: TiledTensor) -> TiledTensor:
        """y = x·W + b, ``x`` as the GEMM reads it."""
        y = ops.gemm(x, self.weight.operand)
        if self.bias is not None:
            ops.add_fiber(self.bias.value, y, axis=y.ndim - 1)
        return y

    def grads(self, ctx: LeafContext, x: TiledTensor, dy: TiledTensor,
              dx: TiledTensor | None = None) -> TiledTensor:
        """dW += xᵀ·dy; db += Σ dy; returns dx (+)= dy·Wᵀ (``x`` as saved, ``dy`` float32,
        both passed to the GEMMs as the precision says; the sums and dx float32)."""
        dyg = ctx.operand(dy)
        with ctx.weight_grads():
            ops.gemm(ctx.operand(x), dyg, trans_a=True, ndim=x.ndim - 1, beta=1.0,
                     out=self.weight.grad)
            if self.bias is not None:
                ops.sum_fiber(dy, axis=dy.ndim - 1, out=self.bias.grad, beta=1.0)
        return ops.gemm(dyg, self.weight.operand, trans_b=True, out=dx,
                        beta=0.0 if dx is None else 1.0)
