"""Models on tiled tensors.

``GPT2`` loads on first use (PEP 562), so ``nntile_lab.nn.config`` — the model's shape,
which the memory planner and the CLI's parser read — and ``nntile_lab.nn.activations`` —
what a step saves, which the planner sizes — import without the compiled extension
(``nntile-lab --help``, ``plan`` and figure redraws work without StarPU).

``gpt2`` is the math, ``policy`` where tensors are freed and which stage, priority and
memory hints the tasks get, ``activations`` the saved records (docs/model.md).
"""
from __future__ import annotations

import importlib

from nntile_lab.nn.config import GPT2Config

_LAZY = {"GPT2": "nntile_lab.nn.gpt2", "load_checkpoint_file": "nntile_lab.nn.state"}
__all__ = ["GPT2", "GPT2Config", "load_checkpoint_file"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'nntile_lab.nn' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
