"""The transformer's feed-forward part, composed of layers (no backward written here)."""
from __future__ import annotations

from nntile_lab.nn.activation import GELU, SiLUGate
from nntile_lab.nn.linear import Linear
from nntile_lab.nn.module import Module


class MLP(Module):
    """c_proj(gelu(c_fc(x))): n_embd → n_inner → n_embd. ``proj_init_std``: c_proj's init
    (GPT-2 scales the residual projections by 1/√(2·n_layer))."""

    def __init__(self, n_embd: int, n_inner: int, *, embd_tile: int | None = None,
                 inner_tile: int | None = None, init_std: float = 0.02,
                 proj_init_std: float = 0.02):
        super().__init__()
        self.c_fc = Linear(n_embd, n_inner, in_tile=embd_tile, out_tile=inner_tile,
                           init_std=init_std)
        self.act = GELU()
        self.c_proj = Linear(n_inner, n_embd, in_tile=inner_tile, out_tile=embd_tile,
                             init_std=proj_init_std)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GatedMLP(Module):
    """down_proj(silu(gate_proj(x))·up_proj(x)): Llama's SwiGLU feed-forward, n_embd →
    n_inner (twice) → n_embd, no biases by default (Hugging Face's LlamaMLP names)."""

    def __init__(self, n_embd: int, n_inner: int, *, embd_tile: int | None = None,
                 inner_tile: int | None = None, bias: bool = False, init_std: float = 0.02,
                 proj_init_std: float = 0.02):
        super().__init__()
        self.gate_proj = Linear(n_embd, n_inner, bias=bias, in_tile=embd_tile,
                                out_tile=inner_tile, init_std=init_std)
        self.up_proj = Linear(n_embd, n_inner, bias=bias, in_tile=embd_tile,
                              out_tile=inner_tile, init_std=init_std)
        self.down_proj = Linear(n_inner, n_embd, bias=bias, in_tile=inner_tile,
                                out_tile=embd_tile, init_std=proj_init_std)
        self.act = SiLUGate()

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x), self.up_proj(x)))
