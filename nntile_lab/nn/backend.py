"""Where the layers' tiled ops, tensors and runtime come from.

A layer calls ``ops.gemm(...)`` through this module's ``ops``: the StarPU ops
(``nntile_lab.ops``, loaded on first use, so that the layers import without the compiled
extension) or, inside a dry run (``nn.meta.dry_run``), shape-only stand-ins that record the
tasks, allocations and frees the same code would make — the memory planner's source. The
model's code is the same either way.
"""
from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)   # nntile_lab.tensor.BFLOAT16, without the extension
F32 = np.dtype(np.float32)

_dry = None          # the active dry run (nn.meta.DryRun), or None: StarPU
_loaded: dict = {}   # the real modules, once imported


def _real(module: str):
    try:
        return _loaded[module]
    except KeyError:
        # the compiled extension loads here, on first use: importing a layer must not need it
        _loaded[module] = importlib.import_module(module)
        return _loaded[module]


class _Ops:
    """``nntile_lab.ops``, or the dry run's stand-ins."""

    def __getattr__(self, name: str):
        if _dry is not None:
            return _dry.op(name)
        return getattr(_loaded.get("nntile_lab.ops") or _real("nntile_lab.ops"), name)


ops = _Ops()


def empty(shape, tile_shape=None, dtype=np.float32):
    """A new tensor (``nntile_lab.tensor.empty``, or a dry run's shape-only one)."""
    if _dry is not None:
        return _dry.empty(shape, tile_shape, dtype)
    return _real("nntile_lab.tensor").empty(shape, tile_shape, dtype)


def from_numpy(array: np.ndarray, tile_shape=None):
    """A tensor holding ``array`` (a dry run keeps only its shape)."""
    if _dry is not None:
        return _dry.from_numpy(array, tile_shape)
    return _real("nntile_lab.tensor").from_numpy(array, tile_shape)


def runtime():
    """The running ``Runtime`` (or the dry run's stand-in, which has its scopes and hints)."""
    if _dry is not None:
        return _dry.runtime
    return _real("nntile_lab.runtime").Runtime.current()


def mark(name: str) -> None:
    """Name a point of a step for a dry run's accounting (nothing outside one)."""
    if _dry is not None:
        _dry.mark(name)


def dry_run_active():
    """The active dry run, or None."""
    return _dry


def set_dry_run(dry):
    """Make ``dry`` (or None) the backend; returns the previous one (``nn.meta`` only)."""
    global _dry
    previous, _dry = _dry, dry
    return previous
