"""GPT-2 assembled from the layers: learned positions, pre-norm blocks, causal multi-head
attention, GELU-tanh MLP, the head tied to the token embedding, no dropout.

Shapes: B batch, T sequence, E n_embd, H heads, F n_inner, V vocabulary. No backward is
written here: each layer has its own (``nn.linear``, ``nn.attention``, …) and the step's
tape runs them in reverse (``nn.tape``).
"""
from __future__ import annotations

import numpy as np

from nntile_lab.nn.block import Block
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.embedding import Embedding
from nntile_lab.nn.head import LMHead
from nntile_lab.nn.model import LanguageModel
from nntile_lab.nn.module import Module, ModuleList
from nntile_lab.nn.norm import LayerNorm
from nntile_lab.nn.state import (
    from_hf,
    from_hf_entry,
    init_chunk_elems,
    iter_init_chunks,
    to_hf,
)


class GPT2(LanguageModel):
    """``GPT2(config, seed=0, precision="fp32")``; parameters in Hugging Face
    GPT2LMHeadModel's names (q, k and v kept apart inside, joined into c_attn in state
    dicts: ``nn.state``)."""

    config_class = GPT2Config

    def build(self, c: GPT2Config) -> None:
        E, V, F = c.n_embd, c.vocab_size, c.n_inner
        et, it, ht = c.embd_tile, c.inner_tile, c.head_tile
        proj_std = 0.02 / np.sqrt(2 * c.n_layer)   # residual projections, scaled by depth
        self.transformer = t = Module()
        t.wte = Embedding(V, E, row_tile=c.vocab_tile, embd_tile=et)
        t.wpe = Embedding(c.n_positions, E, row_tile=c.seq_tile, embd_tile=et)
        t.h = ModuleList(Block(E, c.n_head, F, eps=c.layer_norm_epsilon, embd_tile=et,
                               inner_tile=it, head_tile=ht, proj_init_std=proj_std)
                         for _ in range(c.n_layer))
        t.ln_f = LayerNorm(E, tile=et, eps=c.layer_norm_epsilon)
        self.lm_head = LMHead(E, V, weight=t.wte.weight)

    def forward(self, ids, labels, pos):
        t = self.transformer
        x = t.wte(ids) + t.wpe(pos)                   # (B, T, E)
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x), labels)        # mean cross-entropy

    def inputs(self, input_ids, labels) -> dict[str, np.ndarray]:
        arrays = super().inputs(input_ids, labels)
        B, T = arrays["ids"].shape
        arrays["pos"] = np.ascontiguousarray(np.broadcast_to(np.arange(T, dtype=np.int64),
                                                             (B, T)))
        return arrays

    # ---- Hugging Face names and GPT-2's initialisation (nn.state) -------------------
    def to_hf(self, arrays):
        return to_hf(arrays, self.config)

    def from_hf(self, state):
        return from_hf(state, self.config)

    def init_weights(self, seed: int) -> None:
        """Hugging Face's order and layout (c_attn drawn whole, then split), in row bands:
        the values of ``nn.state.init_state_dict(config, seed)``."""
        if self._dry_init():
            return
        for name, row0, chunk in iter_init_chunks(self.config, seed):
            for n, part in from_hf_entry(name, chunk).items():
                self.params[n].copy_rows_from_numpy(part, row0)

    def init_staging_elems(self) -> int:
        return init_chunk_elems(self.config)
