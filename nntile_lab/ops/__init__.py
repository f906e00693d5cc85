"""Tiled ops: each loops over tiles and submits one StarPU task per tile op."""
from nntile_lab.ops._common import SubmitError
from nntile_lab.ops.elementwise import (
    add,
    axpy,
    copy,
    fill,
    gelu,
    gelu_backward,
    multiply,
    scale,
)
from nntile_lab.ops.gemm import gemm
from nntile_lab.ops.layernorm import layer_norm, layer_norm_backward
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
from nntile_lab.ops.softmax import softmax, softmax_backward

__all__ = ["SubmitError", "add", "add_fiber", "add_slice", "axpy", "copy", "fill", "gelu",
           "gelu_backward", "gemm", "layer_norm", "layer_norm_backward", "max_slice", "mul_fiber",
           "mul_slice", "multiply", "scale", "softmax", "softmax_backward", "sum_fiber",
           "sum_slice", "sumprod_slice", "sumsq_all", "sumsq_slice"]
