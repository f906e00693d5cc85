"""A Llama assembled from the layers: token embedding, pre-norm decoder layers (RMS norm,
causal attention with grouped-query heads and rotary positions, a SwiGLU MLP), a final RMS
norm and an untied head; no biases, no dropout.

Shapes: B batch, T sequence, E n_embd, H heads (n_kv_head of them for keys and values), F
n_inner, V vocabulary. No backward is written here: each layer has its own and the step's
tape runs them in reverse (``nn.tape``). Parameters carry Hugging Face LlamaForCausalLM's
names; its projections are torch ``Linear``s, stored (out, in): ``state_dict`` transposes
them (here every weight is stored (in, out), as the GEMMs read it).
"""
from __future__ import annotations

import numpy as np

from nntile_lab.nn.attention import Attention, Rotary
from nntile_lab.nn.config import LlamaConfig
from nntile_lab.nn.embedding import Embedding
from nntile_lab.nn.head import LMHead
from nntile_lab.nn.mlp import GatedMLP
from nntile_lab.nn.model import LanguageModel
from nntile_lab.nn.module import Module, ModuleList
from nntile_lab.nn.norm import RMSNorm


class DecoderLayer(Module):
    """h = x + self_attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h))."""

    def __init__(self, c: LlamaConfig, rotary: Rotary):
        super().__init__()
        et = c.embd_tile
        self.self_attn = Attention(c.n_embd, c.n_head, n_kv_head=c.n_kv_head, embd_tile=et,
                                   head_tile=c.head_tile, bias=False, rotary=rotary,
                                   names=("q_proj", "k_proj", "v_proj", "o_proj"))
        self.mlp = GatedMLP(c.n_embd, c.n_inner, embd_tile=et, inner_tile=c.inner_tile)
        self.input_layernorm = RMSNorm(c.n_embd, tile=et, eps=c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.n_embd, tile=et, eps=c.rms_norm_eps)

    def forward(self, x, rope):
        x = x + self.self_attn(self.input_layernorm(x), rope=rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(LanguageModel):
    """``Llama(config, seed=0, precision="fp32")``: the GPT2 API (``forward_backward``,
    ``loss``, ``state_dict``, ...) in Hugging Face LlamaForCausalLM's names and layouts."""

    config_class = LlamaConfig

    def build(self, c: LlamaConfig) -> None:
        # one set of rotary tables per step, for every layer
        self.rotary = rotary = Rotary(c.head_size, c.rope_theta, c.n_positions)
        self.model = m = Module()
        m.embed_tokens = Embedding(c.vocab_size, c.n_embd, row_tile=c.vocab_tile,
                                   embd_tile=c.embd_tile)
        m.layers = ModuleList(DecoderLayer(c, rotary) for _ in range(c.n_layer))
        m.norm = RMSNorm(c.n_embd, tile=c.embd_tile, eps=c.rms_norm_eps)
        self.lm_head = LMHead(c.n_embd, c.vocab_size, embd_tile=c.embd_tile,
                              vocab_tile=c.vocab_tile)

    def forward(self, ids, labels):
        m = self.model
        x = m.embed_tokens(ids)                      # (B, T, E)
        # the rotary tables of positions 0…T−1, once per step: inputs of every layer (their
        # records hold them for the backward)
        rope = self.rotary.inputs(ids)
        for layer in m.layers:
            x = layer(x, rope=rope)
        return self.lm_head(m.norm(x), labels)       # mean cross-entropy

    # ---- Hugging Face's names and layouts ---------------------------------------------
    def to_hf(self, arrays):
        """Every projection as a torch Linear stores it: (out, in)."""
        return {n: (np.ascontiguousarray(a.T) if _is_projection(n) else a)
                for n, a in arrays.items()}

    def from_hf(self, state):
        """A LlamaForCausalLM state dict → arrays by our names (projections transposed back),
        checked: one clear error for another model's dict or another size's."""
        family = _family(state)
        if family != "llama":
            raise ValueError(f"this is a {family} state dict (e.g. {next(iter(state), '?')!r}), "
                             "not a Llama's: load it into the model it comes from")
        want = {n: p.shape for n, p in self.named_parameters().items()}
        for n, a in state.items():
            shape = np.shape(a)
            if n in want and _is_projection(n) and shape[::-1] != want[n]:
                raise ValueError(f"{n} has shape {tuple(shape)} (out, in) but this Llama needs "
                                 f"{want[n][::-1]}: the checkpoint comes from a different "
                                 "config (n_embd, n_head, n_kv_head, n_inner)")
        return super().from_hf({n: (np.asarray(a).T if _is_projection(n) else a)
                                for n, a in state.items()})


def _is_projection(name: str) -> bool:
    return name.endswith("_proj.weight")


def _family(state: dict) -> str:
    """Which model a state dict's names are from (its first name's prefix)."""
    names = list(state)
    if any(n.startswith("transformer.") for n in names):
        return "GPT-2"
    if any(n.startswith("model.") for n in names) or not names:
        return "llama"
    return "an unknown model's"
