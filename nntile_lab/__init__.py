"""nntile_lab: GPT-2 training on tiled tensors, one StarPU task per tile op."""
from nntile_lab.runtime import Runtime, TaskError, scheduler_names
from nntile_lab.tensor import (
    TensorTraits,
    TiledTensor,
    empty,
    empty_like,
    from_numpy,
    full,
    zeros,
)
from nntile_lab import ops  # noqa: E402  (ops import the tensor module)

__all__ = ["Runtime", "TaskError", "TensorTraits", "TiledTensor", "empty", "empty_like",
           "from_numpy", "full", "ops", "scheduler_names", "zeros"]
__version__ = "0.1.0"
