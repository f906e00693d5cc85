"""Normalisation over the last axis: GPT-2's ``LayerNorm`` and Llama's ``RMSNorm``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import ops
from nntile_lab.nn.module import Layer, Param, Record, ones, zeros

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor


class LayerNorm(Layer):
    """y = (x − mean)/√(var + eps)·γ + β over the last axis (``n`` long, tiles of ``tile``);
    γ = 1, β = 0 at start."""

    @dataclass
    class Saved(Record):
        x: TiledTensor          # the input (float32 in every mode: the residual stream)
        mean: TiledTensor       # one per row
        inv_std: TiledTensor    # 1/√(var + eps)

    def __init__(self, n: int, *, tile: int | None = None, eps: float = 1e-5):
        super().__init__()
        if not eps > 0:
            raise ValueError(f"eps={eps!r} must be > 0")
        self.n, self.eps = n, eps
        self.weight = Param((n,), (tile,), init=ones)
        self.bias = Param((n,), (tile,), init=zeros)

    def forward(self, ctx: LeafContext, x: TiledTensor):
        self.expect(x, "inputs", size=self.n, tile=self.weight.tile_shape[0])
        y, mean, inv_std = ops.layer_norm(x, self.weight.value, self.bias.value,
                                          axis=x.ndim - 1, eps=self.eps)
        return y, self.Saved(x, mean, inv_std)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=None):
        """dγ += Σ dy·x̂, dβ += Σ dy, dx (+)= inv_std·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ."""
        x = saved.x
        dx, _, _ = ops.layer_norm_backward(x, dy, self.weight.value, saved.mean, saved.inv_std,
                                           axis=x.ndim - 1, dx=dx, dgamma=self.weight.grad,
                                           dbeta=self.bias.grad)
        return dx


class RMSNorm(Layer):
    """y = x/√(mean(x²) + eps)·w over the last axis (``n`` long, tiles of ``tile``); w = 1 at
    start (Hugging Face's LlamaRMSNorm; the mean of squares summed in double here, where
    Hugging Face's computes it in float32)."""

    @dataclass
    class Saved(Record):
        x: TiledTensor          # the input (float32 in every mode: the residual stream)
        inv_rms: TiledTensor    # 1/√(mean(x²) + eps), one per row

    def __init__(self, n: int, *, tile: int | None = None, eps: float = 1e-6):
        super().__init__()
        if not eps > 0:
            raise ValueError(f"eps={eps!r} must be > 0")
        self.n, self.eps = n, eps
        self.weight = Param((n,), (tile,), init=ones)

    def forward(self, ctx: LeafContext, x: TiledTensor):
        self.expect(x, "inputs", size=self.n, tile=self.weight.tile_shape[0])
        y, inv_rms = ops.rms_norm(x, self.weight.value, axis=x.ndim - 1, eps=self.eps)
        return y, self.Saved(x, inv_rms)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=None):
        """dw += Σ dy·x̂, dx (+)= r·(g − x̂·mean(g·x̂)), x̂ = x·r, g = dy·w, r = inv_rms."""
        x = saved.x
        dx, _ = ops.rms_norm_backward(x, dy, self.weight.value, saved.inv_rms,
                                      axis=x.ndim - 1, dx=dx, dweight=self.weight.grad)
        return dx
