"""PyTorch's mixed precision as every PyTorch peer here runs it (the baseline of ``bench
train``, the figures' points, the references' ``forward_backward``): one definition, so that
"PyTorch bf16" means the same thing wherever it is measured or compared.

``bf16`` is ``torch.autocast("cpu", dtype=torch.bfloat16)``: the matmuls (linear layers,
attention) take bf16 inputs and sum in fp32 (oneDNN), the parameters, their gradients and
AdamW's state stay fp32 — the mixed precision a PyTorch user picks on a CPU with bf16
instructions, and the one nntile_lab's ``precision="bf16"`` is compared with.
"""
from __future__ import annotations

import contextlib

TORCH_PRECISIONS = ("fp32", "bf16")


def autocast(precision: str = "fp32"):
    """The context a PyTorch forward runs in for ``precision``. ``fp32`` changes nothing (a
    null context, not ``autocast(enabled=False)``: a caller's own ``torch.autocast`` around
    the call still applies)."""
    if precision not in TORCH_PRECISIONS:
        raise ValueError(f"precision={precision!r}: PyTorch's peers run in "
                         f"{' or '.join(TORCH_PRECISIONS)}")
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch  # here: bench and figures import peer_precision without PyTorch installed

    return torch.autocast("cpu", dtype=torch.bfloat16)


def peer_precision(precision: str) -> str:
    """The PyTorch precision that does what nntile_lab's ``precision`` mode computes in:
    ``bf16`` for bf16 GEMMs; ``fp32`` for fp32 and for ``bf16-storage`` (bf16 storage, fp32
    compute: PyTorch has no storage-only autocast, so its peer computes in fp32)."""
    if precision == "auto":
        raise ValueError("precision='auto' has no PyTorch peer until it is resolved: pass the "
                         "mode it chose (experiment.choose_precision)")
    return "bf16" if precision == "bf16" else "fp32"
