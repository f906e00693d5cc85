"""Shapes, tile shapes and the grid they make: plain data (no StarPU), shared by the tiled
tensors (``nntile_lab.tensor``) and the dry run's shape-only tensors (``nntile_lab.nn.meta``)."""
from __future__ import annotations

import math
from itertools import product
from numbers import Integral


class TensorTraits:
    """Shape, tile shape and the grid they make; the last tile of a dimension may
    be smaller (a leftover). ``tile_shape=None`` means one tile."""

    def __init__(self, shape, tile_shape=None):
        self.shape = _positive_tuple(shape, "shape")
        if tile_shape is None:
            tile_shape = self.shape
        self.tile_shape = _positive_tuple(tile_shape, "tile_shape")
        if len(self.tile_shape) != len(self.shape):
            raise ValueError(f"tile_shape {self.tile_shape} has {len(self.tile_shape)} "
                             f"dimensions but shape {self.shape} has {len(self.shape)}: give "
                             "one tile size per dimension")
        self.tile_shape = tuple(min(t, s) for t, s in zip(self.tile_shape, self.shape))
        self.grid_shape = tuple(-(-s // t) for s, t in zip(self.shape, self.tile_shape))
        self.ntiles = math.prod(self.grid_shape)
        # grid strides (C order) and each tile's shape / offset / size, indexed flat
        self.grid_strides = tuple(math.prod(self.grid_shape[i + 1:]) for i in range(self.ndim))
        self.tile_offsets = [tuple(i * t for i, t in zip(idx, self.tile_shape))
                             for idx in product(*map(range, self.grid_shape))]
        self.tile_shapes = [tuple(min(t, s - o) for t, s, o in
                                  zip(self.tile_shape, self.shape, off))
                            for off in self.tile_offsets]
        self.tile_sizes = [math.prod(s) for s in self.tile_shapes]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def index(self, grid_index) -> int:
        """Flat tile number of a grid index."""
        return sum(i * s for i, s in zip(grid_index, self.grid_strides))

    def grid_index(self, flat: int) -> tuple:
        return tuple(flat // s % g for s, g in zip(self.grid_strides, self.grid_shape))

    def tile_slices(self, flat: int) -> tuple:
        return tuple(slice(o, o + s) for o, s in
                     zip(self.tile_offsets[flat], self.tile_shapes[flat]))

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorTraits) and self.shape == other.shape
                and self.tile_shape == other.tile_shape)

    def __hash__(self) -> int:
        return hash((self.shape, self.tile_shape))

    def __repr__(self) -> str:
        return f"TensorTraits(shape={self.shape}, tile_shape={self.tile_shape})"


def _positive_tuple(values, what: str) -> tuple:
    try:
        values = tuple(values)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers, got {values!r}") from None
    for i, v in enumerate(values):
        if not isinstance(v, Integral) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{what}[{i}] = {v!r} must be a positive integer "
                             f"(got {what}={values}); tile and dimension sizes start at 1")
    return tuple(int(v) for v in values)
