"""nntile_lab: GPT-2 training on tiled tensors, one StarPU task per tile op.

The names below load on first use (PEP 562): ``import nntile_lab`` itself needs no compiled
extension, so what only reads results — records, figures, saved traces — works on a machine
without StarPU, and the extension's helpful ImportError appears where it is needed.
"""
from __future__ import annotations

import importlib

_NAMES = {
    "ops": None, "optim": None,
    "GPT2": "nntile_lab.nn", "GPT2Config": "nntile_lab.nn",
    "Llama": "nntile_lab.nn", "LlamaConfig": "nntile_lab.nn",
    "Runtime": "nntile_lab.runtime", "TaskError": "nntile_lab.runtime",
    "OutOfMemory": "nntile_lab.runtime", "CheckpointError": "nntile_lab.train.checkpoint",
    "scheduler_names": "nntile_lab.runtime", "CudaUnavailable": "nntile_lab.runtime",
    **dict.fromkeys(("TensorTraits", "TiledTensor", "empty", "empty_like", "from_numpy",
                     "from_cupy"), "nntile_lab.tensor"),
    "full": "nntile_lab.ops.create", "zeros": "nntile_lab.ops.create",
    "tune": None, "TuneResult": "nntile_lab.tune",
}

__all__ = sorted(_NAMES)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'nntile_lab' has no attribute {name!r}")
    module = _NAMES[name]
    value = (importlib.import_module(f"nntile_lab.{name}") if module is None
             else getattr(importlib.import_module(module), name))
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
