"""GPT-2 in plain PyTorch, with Hugging Face ``GPT2LMHeadModel`` names and layouts.

Why: the tiled model's forward and backward are checked against this one, weights move
between them (and to and from Hugging Face checkpoints) as ``{name: numpy array}``
dictionaries, and float64 runs give references far below float32 rounding.  The layout is
HF's: ``Conv1D`` weights are stored ``(in, out)`` and the LM head is tied to ``wte`` (no
``lm_head.weight`` entry).  Pre-norm blocks, causal attention, tanh-approximated GELU, no
dropout.
"""
from __future__ import annotations

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nntile_lab.flops import inner_size
from nntile_lab.reference.autocast import autocast

# Entries a Hugging Face state dict may hold that carry no parameters here: the tied head
# and the causal-mask buffers of older ``transformers`` versions.
_HF_EXTRA = re.compile(r"lm_head\.weight|transformer\.h\.\d+\.attn\.(bias|masked_bias)")


def torch_dtype(dtype) -> torch.dtype:
    """``torch.float32`` / ``torch.float64`` from a torch dtype, numpy dtype or name."""
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        try:
            out = {np.float32: torch.float32, np.float64: torch.float64}[np.dtype(dtype).type]
        except (TypeError, KeyError):
            out = None
    if out not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return out


class Conv1D(nn.Module):
    """HF's ``Conv1D``: a linear layer whose weight is stored ``(in, out)``: ``y = x·W + b``."""

    def __init__(self, n_in: int, n_out: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


class Attention(nn.Module):
    """Causal multi-head self-attention, softmax written out (no fused kernel) for clarity."""

    def __init__(self, cfg, dtype: torch.dtype):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = Conv1D(cfg.n_embd, 3 * cfg.n_embd, dtype)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, e = x.shape
        q, k, v = (z.view(b, t, self.n_head, e // self.n_head).transpose(1, 2)
                   for z in self.c_attn(x).split(e, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(e // self.n_head)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(b, t, e))


class MLP(nn.Module):
    """``c_proj(gelu_tanh(c_fc(x)))``; ``linear(n_in, n_out, dtype)`` makes the layers
    (HF's ``Conv1D`` here, ``nn.Linear`` in the nanoGPT-style baseline)."""

    def __init__(self, cfg, dtype: torch.dtype, linear=Conv1D):
        super().__init__()
        self.c_fc = linear(cfg.n_embd, inner_size(cfg), dtype)
        self.c_proj = linear(inner_size(cfg), cfg.n_embd, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, cfg, dtype: torch.dtype, attention=None, linear=Conv1D):
        super().__init__()
        eps = cfg.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=eps, dtype=dtype)
        self.attn = (attention or Attention)(cfg, dtype)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=eps, dtype=dtype)
        self.mlp = MLP(cfg, dtype, linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def gpt2_modules(cfg, dtype: torch.dtype, block) -> nn.ModuleDict:
    """GPT-2's ``transformer``: token and position embeddings, ``cfg.n_layer`` blocks made by
    ``block(cfg, dtype)``, the final LayerNorm (HF's names)."""
    if cfg.n_embd % cfg.n_head:
        raise ValueError(f"n_embd={cfg.n_embd} must be divisible by n_head={cfg.n_head}")
    return nn.ModuleDict({
        "wte": nn.Embedding(cfg.vocab_size, cfg.n_embd, dtype=dtype),
        "wpe": nn.Embedding(cfg.n_positions, cfg.n_embd, dtype=dtype),
        "h": nn.ModuleList(block(cfg, dtype) for _ in range(cfg.n_layer)),
        "ln_f": nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon, dtype=dtype),
    })


def init_gpt2_weights(model: nn.Module, seed: int, transposed: tuple[str, ...] = ()) -> None:
    """GPT-2's init: N(0, 0.02), residual projections (``c_proj``) N(0, 0.02/√(2·L)), biases
    0, LayerNorm weights 1, drawn in parameter order from one generator. Weights whose names
    end in ``transposed`` are stored ``(out, in)``: they are drawn in HF's ``(in, out)`` layout
    and stored transposed, so every model layout gets the same weights from one seed."""
    gen = torch.Generator().manual_seed(seed)
    proj_std = 0.02 / math.sqrt(2 * model.config.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln_" in name or name.startswith("transformer.ln_f"):
                p.fill_(1.0)
            else:
                std = proj_std if name.endswith("c_proj.weight") else 0.02
                flip = bool(transposed) and name.endswith(transposed)
                w = torch.empty(p.shape[::-1] if flip else p.shape, dtype=p.dtype)
                w.normal_(0.0, std, generator=gen)
                p.copy_(w.T if flip else w)


class TorchGPT2(nn.Module):
    """GPT-2 LM whose ``state_dict`` names and shapes are Hugging Face's (tied head).

    ``cfg`` is any object with ``n_layer, n_head, n_embd, n_positions, vocab_size, n_inner``
    (None → ``4·n_embd``) and ``layer_norm_epsilon``.  Weights are initialised with
    ``init_weights(seed)``.
    """

    def __init__(self, cfg, dtype=torch.float32, seed: int = 0):
        super().__init__()
        self.config = cfg
        self.dtype = torch_dtype(dtype)
        self.transformer = gpt2_modules(cfg, self.dtype, Block)
        self.init_weights(seed)

    def init_weights(self, seed: int) -> None:
        """GPT-2's init (``init_gpt2_weights``): the same seed gives the same weights."""
        init_gpt2_weights(self, seed)

    # ---- inputs --------------------------------------------------------------
    def _ids(self, ids, name: str) -> torch.Tensor:
        arr = np.asarray(ids.detach().cpu() if isinstance(ids, torch.Tensor) else ids)
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name} must be a 2-D integer array (batch, seq_len), got "
                             f"shape {arr.shape} dtype {arr.dtype}")
        if arr.shape[1] > self.config.n_positions:
            raise ValueError(f"{name} has seq_len={arr.shape[1]} > n_positions="
                             f"{self.config.n_positions}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.config.vocab_size):
            raise ValueError(f"{name} ids must lie in [0, {self.config.vocab_size}), got range "
                             f"[{arr.min()}, {arr.max()}]")
        return torch.as_tensor(arr, dtype=torch.int64)

    # ---- computation ---------------------------------------------------------
    def forward(self, input_ids) -> torch.Tensor:
        """Logits ``(batch, seq_len, vocab_size)``; the head reuses ``wte`` (tied)."""
        ids = self._ids(input_ids, "input_ids")
        tr = self.transformer
        x = tr.wte(ids) + tr.wpe(torch.arange(ids.shape[1]))
        for block in tr.h:
            x = block(x)
        return tr.ln_f(x) @ tr.wte.weight.T

    def _loss(self, input_ids, labels) -> torch.Tensor:
        ids, lab = self._ids(input_ids, "input_ids"), self._ids(labels, "labels")
        if lab.shape != ids.shape:
            raise ValueError(f"labels shape {tuple(lab.shape)} != input_ids shape "
                             f"{tuple(ids.shape)}")
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1))

    def loss(self, input_ids, labels) -> float:
        """Mean next-token cross-entropy, forward only."""
        with torch.no_grad():
            return float(self._loss(input_ids, labels))

    def forward_backward(self, input_ids, labels, *, accumulate: bool = False,
                         grad_scale: float = 1.0, precision: str = "fp32") -> float:
        """Mean loss; its gradient times ``grad_scale`` is written to (``accumulate=False``)
        or added to (``accumulate=True``) the parameters' ``.grad``. ``precision="bf16"``:
        the forward under bf16 autocast (``reference.autocast``; float32 models only)."""
        if not accumulate:
            self.zero_grad(set_to_none=False)
        with autocast(precision):
            loss = self._loss(input_ids, labels)
        (loss * grad_scale).backward()
        return float(loss.detach())

    # ---- numpy views -----------------------------------------------------------
    def numpy_state_dict(self) -> dict[str, np.ndarray]:
        """Parameters by HF name, as numpy copies."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.state_dict().items()}

    def numpy_grad_state_dict(self) -> dict[str, np.ndarray]:
        """Gradients by parameter name (zeros where no backward has run yet)."""
        return {k: (torch.zeros_like(p) if p.grad is None else p.grad).detach().cpu().numpy()
                .copy() for k, p in self.named_parameters()}

    def load_numpy_state_dict(self, state: dict) -> None:
        """Copy ``{name: array}`` into the parameters (converted to this model's dtype).

        HF-only entries (``lm_head.weight``, attention mask buffers) are skipped; any other
        missing or unexpected name, or a shape mismatch, is an error that names it.
        """
        params = dict(self.named_parameters())
        given = {k: v for k, v in state.items() if not _HF_EXTRA.fullmatch(k)}
        missing, unexpected = sorted(params.keys() - given), sorted(given.keys() - params)
        if missing or unexpected:
            raise KeyError(f"state dict does not match the model: missing {missing}, "
                           f"unexpected {unexpected}")
        for k, v in given.items():
            if tuple(np.shape(v)) != tuple(params[k].shape):
                raise ValueError(f"{k}: shape {tuple(np.shape(v))} does not match the model's "
                                 f"{tuple(params[k].shape)}")
        with torch.no_grad():
            for k, v in given.items():
                params[k].copy_(torch.as_tensor(np.asarray(v)))
