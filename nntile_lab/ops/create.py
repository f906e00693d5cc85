"""Tensors created with a value: ``fill`` on a new tensor (so ``tensor`` needs no op)."""
from __future__ import annotations

import numpy as np

from nntile_lab.ops.elementwise import fill
from nntile_lab.tensor import TiledTensor, empty


def full(shape, value, tile_shape=None, dtype=np.float32) -> TiledTensor:
    return fill(empty(shape, tile_shape, dtype), value)


def zeros(shape, tile_shape=None, dtype=np.float32) -> TiledTensor:
    return full(shape, 0, tile_shape, dtype)
