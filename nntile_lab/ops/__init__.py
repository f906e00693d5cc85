"""Tiled ops: each loops over tiles and submits one StarPU task per tile op.

The element-wise family's tile loops are generated from the codelet table
(kernels/codelets.py) into ``_generated`` at build time; the rest are written here."""
from nntile_lab.ops import _generated
from nntile_lab.ops._common import SubmitError
from nntile_lab.ops._generated import *  # noqa: F403  (the names in _generated.__all__)
from nntile_lab.ops.elementwise import axpy, copy, fill, silu_gate_backward
from nntile_lab.ops.embedding import embedding, embedding_backward
from nntile_lab.ops.gemm import gemm
from nntile_lab.ops.layernorm import layer_norm, layer_norm_backward
from nntile_lab.ops.layout import mask_causal, permute
from nntile_lab.ops.loss import cross_entropy
from nntile_lab.ops.optim import adamw, sgd
from nntile_lab.ops.precision import (
    gelu_backward_bf16,
    gelu_bf16,
    silu_gate_backward_bf16,
    silu_gate_bf16,
    to_bf16,
    to_f32,
)
from nntile_lab.ops.reduce import (
    add_fiber,
    add_slice,
    max_slice,
    mul_fiber,
    mul_slice,
    sum_fiber,
    sum_slice,
    sumprod_slice,
    sumsq_all,
    sumsq_slice,
)
from nntile_lab.ops.rmsnorm import rms_norm, rms_norm_backward
from nntile_lab.ops.rope import rope, rope_backward, rope_tables
from nntile_lab.ops.softmax import softmax, softmax_backward

__all__ = ["SubmitError", "adamw", "add_fiber", "add_slice", "axpy", "copy", "cross_entropy",
           "embedding", "embedding_backward", "fill", "gelu_backward_bf16", "gelu_bf16",
           "gemm", "layer_norm", "layer_norm_backward", "mask_causal", "max_slice",
           "mul_fiber", "mul_slice", "permute", "rms_norm", "rms_norm_backward", "rope",
           "rope_backward", "rope_tables", "sgd", "silu_gate_backward",
           "silu_gate_backward_bf16", "silu_gate_bf16", "softmax", "softmax_backward",
           "sum_fiber", "sum_slice", "sumprod_slice", "sumsq_all", "sumsq_slice",
           "to_bf16", "to_f32"]
__all__ += _generated.__all__
