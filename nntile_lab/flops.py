"""Parameter and FLOP counts of a GPT-2 configuration, without torch or a runtime.

The trainer reports model FLOP/s (the work the model needs, not what the kernels happen to
execute), so runs with different tilings or schedulers compare on the same scale.  The
count is nanoGPT's / the PaLM paper's (appendix B): ``6·N + 12·L·E·T`` per token, where
``N`` excludes the position embedding (a lookup, no multiply-adds) but includes the token
embedding, which the tied LM head multiplies by.
"""
from __future__ import annotations


def inner_size(cfg) -> int:
    """The MLP width: ``cfg.n_inner``, or ``4·n_embd`` when it is None (GPT-2's rule)."""
    n_inner = getattr(cfg, "n_inner", None)
    return 4 * cfg.n_embd if n_inner is None else n_inner


def param_count(cfg, include_wpe: bool = True) -> int:
    """Number of parameters of GPT-2 with a tied LM head (counted once, as ``wte``)."""
    e, f = cfg.n_embd, inner_size(cfg)
    block = (2 * e                  # ln_1
             + e * 3 * e + 3 * e    # attn.c_attn
             + e * e + e            # attn.c_proj
             + 2 * e                # ln_2
             + e * f + f            # mlp.c_fc
             + f * e + e)           # mlp.c_proj
    n = cfg.vocab_size * e + cfg.n_layer * block + 2 * e
    return n + (cfg.n_positions * e if include_wpe else 0)


def flops_per_token(cfg, seq_len: int) -> float:
    """Model FLOPs of one training token (forward + backward): ``6·N + 12·L·E·T``."""
    n = param_count(cfg, include_wpe=False)
    return float(6 * n + 12 * cfg.n_layer * cfg.n_embd * seq_len)
