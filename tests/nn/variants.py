"""Models a user composes from the layers, for the tests: a GPT-J-style parallel block and
a post-norm block, in models written the way a notebook would write them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nntile_lab import nn
from nntile_lab.nn.config import GPT2Config, register_model


@dataclass
class ParallelConfig(GPT2Config):
    """GPT2Config's fields; its own class so that a config names its model."""


@dataclass
class PostNormConfig(GPT2Config):
    pass


class ParallelBlock(nn.Module):
    """GPT-J: x + attn(ln(x)) + mlp(ln(x)), one norm, both branches from it."""

    def __init__(self, c: GPT2Config):
        super().__init__()
        self.ln = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.attn = nn.Attention(c.n_embd, c.n_head, embd_tile=c.embd_tile,
                                 head_tile=c.head_tile)
        self.mlp = nn.MLP(c.n_embd, c.n_inner, embd_tile=c.embd_tile, inner_tile=c.inner_tile)

    def forward(self, x):
        h = self.ln(x)
        return x + self.attn(h) + self.mlp(h)


class PostNormBlock(nn.Module):
    """The original transformer's order: norm after each residual add."""

    def __init__(self, c: GPT2Config):
        super().__init__()
        self.attn = nn.Attention(c.n_embd, c.n_head, embd_tile=c.embd_tile,
                                 head_tile=c.head_tile)
        self.ln_1 = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.mlp = nn.MLP(c.n_embd, c.n_inner, embd_tile=c.embd_tile, inner_tile=c.inner_tile)
        self.ln_2 = nn.LayerNorm(c.n_embd, tile=c.embd_tile)

    def forward(self, x):
        x = self.ln_1(x + self.attn(x))
        return self.ln_2(x + self.mlp(x))


class VariantGPT(nn.LanguageModel):
    """GPT-2's embeddings, final norm and tied head around blocks of ``block`` (untied
    when ``tied`` is False)."""

    block = ParallelBlock
    tied = True

    def build(self, c):
        self.wte = nn.Embedding(c.vocab_size, c.n_embd, row_tile=c.vocab_tile,
                                embd_tile=c.embd_tile)
        self.wpe = nn.Embedding(c.n_positions, c.n_embd, row_tile=c.seq_tile,
                                embd_tile=c.embd_tile)
        self.h = nn.ModuleList(self.block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.head = nn.LMHead(c.n_embd, c.vocab_size, embd_tile=c.embd_tile,
                              vocab_tile=c.vocab_tile,
                              weight=self.wte.weight if self.tied else None)

    def inputs(self, input_ids, labels):
        arrays = super().inputs(input_ids, labels)
        B, T = arrays["ids"].shape
        arrays["pos"] = np.ascontiguousarray(np.broadcast_to(np.arange(T), (B, T)))
        return arrays

    def forward(self, ids, labels, pos):
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x), labels)


class ParallelGPT(VariantGPT):
    config_class = ParallelConfig


class PostNormGPT(VariantGPT):
    config_class = PostNormConfig
    block = PostNormBlock
    tied = False


register_model("test-parallel", ParallelGPT)
register_model("test-postnorm", PostNormGPT)
VARIANTS = {"gpt2": GPT2Config, "test-parallel": ParallelConfig,
            "test-postnorm": PostNormConfig}
