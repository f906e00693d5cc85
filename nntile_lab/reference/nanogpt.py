"""GPT-2 as a fast PyTorch CPU user would write it: nanoGPT's model (the strongest
eager-mode baseline; ``torch_gpt2`` stays the readable, HF-layout reference for parity).

The same model as ``torch_gpt2.TorchGPT2`` (pre-norm blocks, causal attention, tanh GELU,
learned positions, LM head tied to ``wte``, no dropout), written for speed:
  - one fused Q/K/V projection ``c_attn`` (``nn.Linear``, weight stored ``(out, in)``),
  - ``F.scaled_dot_product_attention(..., is_causal=True)`` (PyTorch's fused attention:
    no materialised mask, no separate softmax pass),
  - ``nn.Linear`` everywhere (addmm with the bias fused), ``F.gelu(approximate="tanh")``,
  - the head is ``F.linear(x, wte.weight)`` on the shared parameter.

Weights move from/to the HF layout with ``load_hf_state_dict`` / ``hf_state_dict`` (the
``Conv1D`` weights transposed), so a test can prove the two models compute the same thing.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nntile_lab.reference.autocast import autocast
from nntile_lab.reference.torch_gpt2 import Block, gpt2_modules, init_gpt2_weights, torch_dtype

# HF's Conv1D stores (in, out); nn.Linear stores (out, in): these weights are transposed.
_LINEAR_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                   "mlp.c_proj.weight")


def linear(n_in: int, n_out: int, dtype: torch.dtype) -> nn.Linear:
    return nn.Linear(n_in, n_out, dtype=dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, dtype: torch.dtype):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = linear(cfg.n_embd, 3 * cfg.n_embd, dtype)
        self.c_proj = linear(cfg.n_embd, cfg.n_embd, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, e = x.shape
        q, k, v = (z.view(b, t, self.n_head, e // self.n_head).transpose(1, 2)
                   for z in self.c_attn(x).split(e, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, e))


def block(cfg, dtype: torch.dtype) -> Block:
    """The reference's pre-norm block with the fast attention and ``nn.Linear`` layers."""
    return Block(cfg, dtype, attention=CausalSelfAttention, linear=linear)


class NanoGPT(nn.Module):
    """nanoGPT-style GPT-2 from a GPT2Config-like ``cfg``; weights = ``TorchGPT2(cfg,
    seed=seed)``'s (GPT-2's init), so both references start from the same point."""

    def __init__(self, cfg, dtype=torch.float32, seed: int = 0):
        super().__init__()
        self.config = cfg
        self.dtype = torch_dtype(dtype)
        self.transformer = gpt2_modules(cfg, self.dtype, block)
        self.init_weights(seed)

    def init_weights(self, seed: int) -> None:
        """GPT-2's init, drawn exactly as ``TorchGPT2.init_weights(seed)`` draws it."""
        init_gpt2_weights(self, seed, transposed=_LINEAR_WEIGHTS)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, seq_len, vocab_size)`` of int64 token ids ``(batch, seq_len)``."""
        tr = self.transformer
        x = tr.wte(ids) + tr.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in tr.h:
            x = block(x)
        return F.linear(tr.ln_f(x), tr.wte.weight)

    def loss_tensor(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    def forward_backward(self, input_ids, labels, precision: str = "fp32") -> float:
        """Mean next-token loss; its gradient is written to the parameters' ``.grad``.
        ``precision="bf16"``: the forward under bf16 autocast (``reference.autocast``)."""
        self.zero_grad(set_to_none=True)
        ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.int64)
        lab = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
        with autocast(precision):
            loss = self.loss_tensor(ids, lab)
        loss.backward()
        return float(loss.detach())

    # ---- the HF layout (for parity with TorchGPT2 and the tiled model) ----------------
    def load_hf_state_dict(self, state: dict) -> None:
        """Copy an HF-layout ``{name: array}`` (``TorchGPT2.numpy_state_dict()``) in."""
        own = dict(self.named_parameters())
        with torch.no_grad():
            for name, value in state.items():
                if name not in own:
                    continue  # lm_head.weight / mask buffers: the head is tied here
                w = torch.as_tensor(np.asarray(value))
                w = w.T if name.endswith(_LINEAR_WEIGHTS) else w
                if tuple(w.shape) != tuple(own[name].shape):
                    raise ValueError(f"{name}: shape {tuple(np.shape(value))} does not match "
                                     "the HF layout of this model")
                own[name].copy_(w)
        missing = sorted(set(own) - set(state))
        if missing:
            raise KeyError(f"state dict lacks {missing}")

    def _hf(self, tensors: dict) -> dict[str, np.ndarray]:
        return {n: (t.T if n.endswith(_LINEAR_WEIGHTS) else t).detach().cpu().numpy().copy()
                for n, t in tensors.items()}

    def hf_state_dict(self) -> dict[str, np.ndarray]:
        """Parameters in the HF layout (the names ``TorchGPT2`` uses)."""
        return self._hf(dict(self.named_parameters()))

    def hf_grad_state_dict(self) -> dict[str, np.ndarray]:
        """Gradients in the HF layout (zeros where none was computed)."""
        return self._hf({n: torch.zeros_like(p) if p.grad is None else p.grad
                         for n, p in self.named_parameters()})
