"""Shared checks for tiled ops."""
from __future__ import annotations

import numpy as np

from nntile_lab.tensor import TiledTensor, empty


class SubmitError(RuntimeError):
    """StarPU refused a task."""


def check(ret: int) -> None:
    """Raise if a submit helper returned an error code (kept out of the hot path)."""
    if ret:
        raise SubmitError(f"starpu_task_submit failed with code {ret}")


def same_layout(*tensors: TiledTensor, names: str = "") -> None:
    """Every tensor must have the first one's shape and tile shape."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.traits != first.traits:
            raise ValueError(f"{names + ': ' if names else ''}shapes/tiles differ: "
                             f"{first!r} vs {t!r}; element-wise ops need equal shapes and "
                             "equal tile shapes")


def need_dtype(t: TiledTensor, dtype, what: str) -> None:
    if t.dtype != np.dtype(dtype):
        raise TypeError(f"{what} must be {np.dtype(dtype).name}, got {t.dtype.name}")


def output(out: TiledTensor | None, like: TiledTensor, what: str = "out") -> TiledTensor:
    """``out`` if given (checked against ``like``), else a new tensor like it."""
    if out is None:
        return empty(like.shape, like.tile_shape, like.dtype)
    same_layout(like, out, names=what)
    return out
