"""Element-wise activations: GPT-2's ``GELU`` and the gated MLP's ``SiLUGate``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nntile_lab.nn.backend import BFLOAT16, ops
from nntile_lab.nn.module import Layer, Record

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext
    from nntile_lab.tensor import TiledTensor


class GELU(Layer):
    """y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (GPT-2's tanh form). Under ``bf16``
    one fused pass writes both the kept input and y in bf16 (the next GEMM's operand)."""

    @dataclass
    class Saved(Record):
        x: TiledTensor      # the input as kept (bf16 under a bf16 mode): dx = dy·gelu'(x)

    def forward(self, ctx: LeafContext, x: TiledTensor):
        xk, y = ctx.casts.gelu(x)
        return y, self.Saved(xk)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=None):
        x, beta = saved.x, 0.0 if dx is None else 1.0
        if x.dtype == BFLOAT16:   # read widened by the fused kernel: no float32 copy
            return ops.gelu_backward_bf16(x, dy, dx, beta=beta)
        return ops.gelu_backward(x, dy, dx, beta=beta)


class SiLUGate(Layer):
    """y = silu(g)·u = g·σ(g)·u (SwiGLU: the gate projection's output g through SiLU, times
    the up projection's u): two inputs, one fused pass each way. Under ``bf16`` the fused
    pass writes the kept inputs and y in bf16 (the next GEMM's operand); under
    ``bf16-storage`` the inputs are kept in bf16."""

    @dataclass
    class Saved(Record):
        g: TiledTensor      # both inputs as kept: dg = dy·u·silu'(g), du = dy·silu(g)
        u: TiledTensor

    def forward(self, ctx: LeafContext, g: TiledTensor, u: TiledTensor):
        gk, uk, y = ctx.casts.silu_gate(g, u)
        return y, self.Saved(gk, uk)

    def backward(self, ctx: LeafContext, saved: Saved, dy: TiledTensor, dx=(None, None)):
        dg, du = dx
        grads = ctx.casts.silu_gate_backward
        if (dg is None) == (du is None):   # both new, or both added into
            return grads(saved.g, saved.u, dy, dg, du, beta=0.0 if dg is None else 1.0)
        new_g, new_u = grads(saved.g, saved.u, dy)
        given, new, keep = (dg, new_g, new_u) if dg is not None else (du, new_u, new_g)
        ops.add(new, given)
        new.free()
        return (given, keep) if dg is not None else (keep, given)
