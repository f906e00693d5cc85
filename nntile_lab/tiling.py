"""Shapes, tile shapes and the grid they make: plain data (no StarPU), shared by the tiled
tensors (``nntile_lab.tensor``) and the dry run's shape-only tensors (``nntile_lab.nn.meta``)."""
from __future__ import annotations

import math
from functools import lru_cache
from itertools import product
from numbers import Integral
from typing import NamedTuple


class TensorTraits:
    """Shape, tile shape and the grid they make; the last tile of a dimension may
    be smaller (a leftover). ``tile_shape=None`` means one tile.

    Immutable, and shared: a step makes the same few layouts hundreds of times (every
    temporary, every view), and the per-tile tables cost more than the task submits of a
    small tensor, so each (shape, tile_shape) is built once."""

    _made: dict = {}
    _MAX_MADE = 4096

    def __new__(cls, shape, tile_shape=None):
        try:   # plain ints only: anything else is checked (and refused) by _build
            key = (tuple(shape), None if tile_shape is None else tuple(tile_shape))
            if all(type(v) is int for part in key if part is not None for v in part):
                return cls._made[key]
        except (KeyError, TypeError):   # new, or not hashable: built (and checked) below
            pass
        self = super().__new__(cls)
        self._build(shape, tile_shape)
        if len(cls._made) >= cls._MAX_MADE:
            cls._made.clear()
        cls._made[(self.shape, None if tile_shape is None else self.tile_shape_given)] = self
        return self

    def _build(self, shape, tile_shape) -> None:
        self.shape = _positive_tuple(shape, "shape")
        if tile_shape is None:
            tile_shape = self.shape
        self.tile_shape = self.tile_shape_given = _positive_tuple(tile_shape, "tile_shape")
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
        self.size = math.prod(self.shape)     # elements; the first tile is the largest

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

    def split_axis(self, axis: int, inner: int) -> TensorTraits:
        """Dimension ``axis`` (size s, tile t) split into (s/inner, inner), tiles
        (t/inner, inner): the same tiles in the same order (e.g. E → heads × head size)."""
        axis = _axis(axis, self.ndim)
        s, t = self.shape[axis], self.tile_shape[axis]
        if isinstance(inner, bool) or not isinstance(inner, Integral):
            raise TypeError(f"split_axis: inner={inner!r} must be an int (the size of the "
                            f"inner block, e.g. head_size)")
        if inner < 1:
            raise ValueError(f"split_axis: inner={inner} must be ≥ 1")
        if s % inner or t % inner:
            raise ValueError(f"cannot split dimension {axis} (size {s}, tile {t}) into "
                             f"blocks of {inner}: both must be multiples of {inner}")
        return TensorTraits(self.shape[:axis] + (s // inner, inner) + self.shape[axis + 1:],
                            self.tile_shape[:axis] + (t // inner, inner)
                            + self.tile_shape[axis + 1:])

    def merge_axes(self, axis: int) -> TensorTraits:
        """Dimensions ``axis`` and ``axis + 1`` merged; the second must be a single tile
        (then every tile keeps its memory layout and its place in the grid)."""
        axis = _axis(axis, self.ndim - 1)
        (a, b), (ta, tb) = self.shape[axis:axis + 2], self.tile_shape[axis:axis + 2]
        if tb != b:
            raise ValueError(f"cannot merge dimensions {axis} and {axis + 1}: dimension "
                             f"{axis + 1} (size {b}) is split into tiles of {tb}; it must be "
                             "one tile")
        return TensorTraits(self.shape[:axis] + (a * b,) + self.shape[axis + 2:],
                            self.tile_shape[:axis] + (ta * b,) + self.tile_shape[axis + 2:])

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


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


class TileStep(NamedTuple):
    """One tile of x along an axis: its slice and fiber tiles, its (m, k, n) view, and
    where it sits along the axis (``first``/``last``) and in the fiber's accumulation order
    (``fiber_first``: the first tile adding into its fiber tile). See ``ops.reduce``."""
    x: int
    s: int
    f: int
    m: int
    k: int
    n: int
    first: bool
    last: bool
    fiber_first: bool


@lru_cache(maxsize=512)
def plan(traits: TensorTraits, axis: int) -> tuple[TileStep, ...]:
    """The tiles of a tensor with ``traits`` in C order of its grid (so each slice
    tile meets its tiles in increasing order along the axis)."""
    grid = traits.grid_shape
    sgrid = grid[:axis] + grid[axis + 1:]
    sstrides = [math.prod(sgrid[d + 1:]) for d in range(len(sgrid))]
    steps = []
    for xi in range(traits.ntiles):
        g, shape = traits.grid_index(xi), traits.tile_shapes[xi]
        si = sum(i * s for i, s in zip(g[:axis] + g[axis + 1:], sstrides))
        steps.append(TileStep(xi, si, g[axis], math.prod(shape[:axis]), shape[axis],
                              math.prod(shape[axis + 1:]), g[axis] == 0,
                              g[axis] == grid[axis] - 1, si == 0))
    return tuple(steps)
