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

__all__ = ["SubmitError", "add", "axpy", "copy", "fill", "gelu", "gelu_backward", "gemm",
           "multiply", "scale"]
