"""A Llama in plain PyTorch, with Hugging Face ``LlamaForCausalLM`` names and layouts.

Why: the tiled Llama's loss and gradients are checked against this one in float64 (far below
float32 rounding), and ``bench train --model llama`` times it (eager or ``torch.compile``,
float32 or bf16 autocast) beside nntile_lab. Weights move between them as ``{name: numpy
array}`` dictionaries in Hugging Face's names and layouts: every projection a torch
``Linear`` (weight ``(out, in)``, no bias), the head untied (``lm_head.weight``).

The model: token embedding, pre-norm decoder layers (RMS norm, causal attention with
grouped-query heads and rotary positions in the rotate-half convention, a SwiGLU MLP), a
final RMS norm, the head, mean cross-entropy. Unlike Hugging Face's, the RMS norm and the
rotary angles are computed in the model's own dtype (Hugging Face's LlamaRMSNorm and
LlamaRotaryEmbedding work in float32 even in a float64 model): a float64 reference here is
float64 throughout.

``fast=True`` writes it as a fast PyTorch CPU user would (the benchmark's baseline): PyTorch's
fused attention (``F.scaled_dot_product_attention`` with ``enable_gqa``: no materialised mask,
K and V never repeated), ``F.rms_norm``, the rotary tables made once per length — the same
function of the same weights.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nntile_lab.reference.autocast import autocast
from nntile_lab.reference.torch_gpt2 import torch_dtype


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float, dtype: torch.dtype, fast: bool = False):
        super().__init__()
        self.eps, self.fast = eps, fast
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fast:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(n_tokens: int, head_size: int, theta: float, dtype: torch.dtype):
    """cos and sin of θ[t, d] = t·theta^(−2d/D) for d < D/2, duplicated over the two halves
    (Hugging Face's layout), computed in float64."""
    inv_freq = theta ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)
    angle = torch.arange(n_tokens, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([angle, angle], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    """Causal self-attention, n_kv_head key/value heads each shared by n_head/n_kv_head
    consecutive query heads (Hugging Face's repeat_kv), rotary positions on q and k."""

    def __init__(self, cfg, dtype: torch.dtype, fast: bool = False):
        super().__init__()
        e, self.n_head, self.n_kv = cfg.n_embd, cfg.n_head, cfg.n_kv_head
        self.d, self.theta, self.fast = e // cfg.n_head, cfg.rope_theta, fast
        self._tables: dict = {}
        self.q_proj = nn.Linear(e, self.n_head * self.d, bias=False, dtype=dtype)
        self.k_proj = nn.Linear(e, self.n_kv * self.d, bias=False, dtype=dtype)
        self.v_proj = nn.Linear(e, self.n_kv * self.d, bias=False, dtype=dtype)
        self.o_proj = nn.Linear(self.n_head * self.d, e, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_head, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.d).transpose(1, 2)
        key = (t, q.dtype)
        if key not in self._tables:
            self._tables[key] = rope_cos_sin(t, self.d, self.theta, q.dtype)
        cos, sin = self._tables[key]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if self.fast:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=self.n_kv != self.n_head)
            return self.o_proj(y.transpose(1, 2).reshape(b, t, self.n_head * self.d))
        group = self.n_head // self.n_kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, t, self.n_head * self.d))


class MLP(nn.Module):
    """down_proj(silu(gate_proj(x))·up_proj(x))"""

    def __init__(self, cfg, dtype: torch.dtype):
        super().__init__()
        e, f = cfg.n_embd, cfg.n_inner
        self.gate_proj = nn.Linear(e, f, bias=False, dtype=dtype)
        self.up_proj = nn.Linear(e, f, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(f, e, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, dtype: torch.dtype, fast: bool = False):
        super().__init__()
        self.self_attn = Attention(cfg, dtype, fast)
        self.mlp = MLP(cfg, dtype)
        self.input_layernorm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps, dtype, fast)
        self.post_attention_layernorm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps, dtype, fast)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg, dtype: torch.dtype, fast: bool = False):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.n_embd, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(cfg, dtype, fast) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps, dtype, fast)


class TorchLlama(nn.Module):
    """``TorchLlama(config, dtype=torch.float64, fast=False, seed=None)``: ``config`` has the
    fields of ``nntile_lab.nn.LlamaConfig`` (n_layer, n_head, n_kv_head, n_embd, n_inner,
    vocab_size, rope_theta, rms_norm_eps). ``forward(ids, labels)`` → mean cross-entropy.
    ``seed``: Hugging Face's initialisation (N(0, 0.02²), norms 1) from that seed."""

    def __init__(self, cfg, dtype=torch.float64, fast: bool = False, seed: int | None = None):
        super().__init__()
        dtype = torch_dtype(dtype)
        self.config = cfg
        self.model = Body(cfg, dtype, fast)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, dtype=dtype)
        if seed is not None:
            gen = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if not name.endswith("norm.weight"):
                        p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.02)

    def loss_tensor(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy (the benchmark's step calls this under its autocast)."""
        return self(ids, labels)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor,
                precision: str = "fp32") -> torch.Tensor:
        with autocast(precision):
            x = self.model.embed_tokens(ids)
            for layer in self.model.layers:
                x = layer(x)
            logits = self.lm_head(self.model.norm(x))
        logits = logits.reshape(-1, logits.shape[-1])
        if logits.dtype == torch.bfloat16:   # the loss in float32, as nntile_lab's
            logits = logits.float()
        return F.cross_entropy(logits, labels.reshape(-1))

    def load_numpy(self, state: dict[str, np.ndarray]) -> None:
        """Set every parameter from ``{name: array}`` (Hugging Face names and layouts)."""
        params = dict(self.named_parameters())
        missing, unexpected = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        if missing or unexpected:
            raise ValueError(f"state dict does not match: missing {missing[:5]}, unexpected "
                             f"{unexpected[:5]}")
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(torch.from_numpy(np.asarray(state[name])).to(p.dtype))

    def numpy_state(self) -> dict[str, np.ndarray]:
        return {n: p.detach().cpu().numpy() for n, p in self.named_parameters()}

    def numpy_grads(self) -> dict[str, np.ndarray]:
        return {n: p.grad.detach().cpu().numpy() for n, p in self.named_parameters()}
