"""Models on tiled tensors, built from layers.

Layers (each with its own forward and backward from tiled ops): ``Linear``, ``LayerNorm``,
``RMSNorm``, ``Embedding``, ``GELU``, ``SiLUGate``, ``Attention`` (grouped-query heads and
rotary positions as options), ``LMHead``; compositions (no backward written): ``MLP``,
``GatedMLP``, ``Block``; models: ``GPT2``, ``Llama`` (``LanguageModel`` gives every model the
same API).
``Module``/``ModuleList``/``Layer``/``Param``/``Record`` are the pieces to build new ones
(docs/model.md, docs/adding-a-layer.md).

The names load on first use (PEP 562), so that ``nntile_lab.nn.config`` — the models'
shapes, which the spec reads — imports alone. None of this package needs the compiled
extension to import (a module tree is plain data; the tiled ops load when a step first
runs): ``nntile-lab plan``, ``--help`` and figure redraws work without StarPU.
"""
from __future__ import annotations

import importlib

from nntile_lab.nn.config import GPT2Config, LlamaConfig  # noqa: F401  (in __all__)

_LAZY = {
    "GELU": "activation", "SiLUGate": "activation", "Attention": "attention",
    "Rotary": "attention", "Block": "block", "Embedding": "embedding",
    "GPT2": "gpt2", "LMHead": "head", "Linear": "linear", "MLP": "mlp", "GatedMLP": "mlp",
    "Llama": "llama", "LanguageModel": "model", "LayerNorm": "norm", "RMSNorm": "norm",
    "load_checkpoint_file": "state",
    **dict.fromkeys(("Init", "Layer", "Module", "ModuleList", "Param", "Record",
                     "normal", "ones", "zeros"), "module"),
    **dict.fromkeys(("ShapeError", "SpentValue", "Value", "add"), "tape"),
}
__all__ = sorted(["GPT2Config", "LlamaConfig", *_LAZY])


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'nntile_lab.nn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"nntile_lab.nn.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
