"""The transformer block, composed of layers (no backward written here)."""
from __future__ import annotations

from nntile_lab.nn.attention import Attention
from nntile_lab.nn.mlp import MLP
from nntile_lab.nn.module import Module
from nntile_lab.nn.norm import LayerNorm


class Block(Module):
    """Pre-norm residual block: h = x + attn(ln_1(x)); out = h + mlp(ln_2(h)).

    Other arrangements are a few lines of a Module of your own: post-norm
    ``x = self.ln_1(x + self.attn(x))``, or GPT-J's parallel ``x + self.attn(h) +
    self.mlp(h)`` with ``h = self.ln(x)`` (docs/model.md)."""

    def __init__(self, n_embd: int, n_head: int, n_inner: int, *, eps: float = 1e-5,
                 embd_tile: int | None = None, inner_tile: int | None = None,
                 head_tile: int | None = None, init_std: float = 0.02,
                 proj_init_std: float = 0.02):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, tile=embd_tile, eps=eps)
        self.attn = Attention(n_embd, n_head, embd_tile=embd_tile, head_tile=head_tile,
                              init_std=init_std, proj_init_std=proj_init_std)
        self.ln_2 = LayerNorm(n_embd, tile=embd_tile, eps=eps)
        self.mlp = MLP(n_embd, n_inner, embd_tile=embd_tile, inner_tile=inner_tile,
                       init_std=init_std, proj_init_std=proj_init_std)

    def forward(self, x, **kw):
        """``kw`` (a KV cache, a position offset) goes to the attention untouched."""
        x = x + self.attn(self.ln_1(x), **kw)
        return x + self.mlp(self.ln_2(x))
