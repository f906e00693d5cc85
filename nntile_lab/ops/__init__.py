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
from nntile_lab.ops.embedding import embedding, embedding_backward
from nntile_lab.ops.gemm import gemm
from nntile_lab.ops.layout import mask_causal, permute
from nntile_lab.ops.loss import cross_entropy
from nntile_lab.ops.optim import adamw_step, sgd_step

__all__ = ["SubmitError", "adamw_step", "add", "axpy", "copy", "cross_entropy", "embedding",
           "embedding_backward", "fill", "gelu", "gelu_backward", "gemm", "mask_causal",
           "multiply", "permute", "scale", "sgd_step"]
