"""The MLP width rule shared by the configs and the spec, without torch or a runtime.

Parameter and FLOP counts are the model's own: each layer declares its FLOPs per token
(``Module.own_flops_per_token``) and a model sums them over its tree
(``GPT2Config.flops_per_token``, ``ExperimentSpec.flops_per_step``): PaLM appendix B's
count, ``6·N + 12·L·E·T`` for GPT-2, where ``N`` excludes the position embedding (a lookup,
no multiply-adds) but includes the token embedding, which the tied head multiplies by.
The trainer reports model FLOP/s (the work the model needs, not what the kernels happen to
execute), so runs with different tilings or schedulers compare on the same scale.
"""
from __future__ import annotations


def inner_size(cfg) -> int:
    """The MLP width: ``cfg.n_inner``, or ``4·n_embd`` when it is None (GPT-2's rule)."""
    n_inner = getattr(cfg, "n_inner", None)
    return 4 * cfg.n_embd if n_inner is None else n_inner
