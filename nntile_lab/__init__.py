"""nntile_lab: GPT-2 training on tiled tensors, one StarPU task per tile op."""
from nntile_lab import ops, optim
from nntile_lab.nn import GPT2, GPT2Config
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

__all__ = ["GPT2", "GPT2Config", "Runtime", "TaskError", "TensorTraits", "TiledTensor", "empty",
           "empty_like", "from_numpy", "full", "ops", "optim", "scheduler_names", "zeros"]
__version__ = "0.1.0"
