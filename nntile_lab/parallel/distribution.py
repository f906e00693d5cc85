"""Who owns each tile under StarPU-MPI, and the training layouts built from that.

Distributions (``with rt.mpi.distribute(BlockCyclic(axes=(0,))): ...``):

- ``OnRank(r)``: every tile on rank r;
- ``Replicated()``: each rank owns its own copy (only tasks whose inputs are replicated too may
  write it: every rank then runs them, and no tile moves);
- ``BlockCyclic(axes, grid, block)``: tile (i₀, i₁, …) goes to rank
  Σⱼ ((i_{axes[j]} // block) mod grid[j]) · Πₖ<ⱼ grid[k], a block-cyclic map of the chosen
  grid axes onto a rank grid (default: one axis over all ranks);
- ``TileCyclic()`` (default): flat tile index mod ranks — spreads every tensor's tiles.

Plain data (no compiled extension): the command line reads :data:`LAYOUTS` before any
StarPU starts.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass


class Distribution:
    replicated = False   # every rank owns its own copy: nothing to gather or flush

    def owners(self, grid_shape: tuple, size: int, rank: int) -> list[int]:
        raise NotImplementedError


@dataclass(frozen=True)
class OnRank(Distribution):
    rank: int = 0

    def owners(self, grid_shape, size, rank):
        if not 0 <= self.rank < size:
            raise ValueError(f"OnRank({self.rank}): rank must be from 0 to {size - 1}")
        return [self.rank] * math.prod(grid_shape)


@dataclass(frozen=True)
class Replicated(Distribution):
    replicated = True

    def owners(self, grid_shape, size, rank):
        return [rank] * math.prod(grid_shape)


@dataclass(frozen=True)
class TileCyclic(Distribution):
    def owners(self, grid_shape, size, rank):
        return [i % size for i in range(math.prod(grid_shape))]


@dataclass(frozen=True)
class BlockCyclic(Distribution):
    axes: tuple = (0,)
    grid: tuple | None = None      # ranks along each axis; default (all ranks,) for one axis
    block: int = 1                 # consecutive tiles per rank along each axis

    def owners(self, grid_shape, size, rank):
        grid = self.grid or ((size,) if len(self.axes) == 1 else None)
        if grid is None or len(grid) != len(self.axes) or math.prod(grid) != size:
            raise ValueError(f"BlockCyclic(axes={self.axes}, grid={self.grid}): give a rank "
                             f"grid with one entry per axis whose product is {size} ranks")
        if self.block < 1:
            raise ValueError(f"BlockCyclic block={self.block} must be >= 1")
        out = []
        for flat in range(math.prod(grid_shape)):
            idx = _unravel(flat, grid_shape)
            owner, stride = 0, 1
            for ax, g in zip(self.axes, grid):
                i = idx[ax] if ax < len(idx) else 0     # a tensor without that axis: block 0
                owner += ((i // self.block) % g) * stride
                stride *= g
            out.append(owner)
        return out


def _unravel(flat: int, shape: tuple) -> tuple:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


# Training layouts (``nntile-lab train --ranks N --layout NAME``): the distribution the model's
# parameters and optimizer state are made under, and the one its steps' activations are
# made under (None: the same).
LAYOUTS = ("operator", "operator-2d", "data")


def layout(name: str, size: int) -> tuple[Distribution, Distribution | None]:
    """``(for the model, for the steps)`` of a layout on ``size`` ranks:

    - ``operator``: every tensor's tiles spread tile-cyclic over the ranks (each op's tiles
      computed where they live);
    - ``operator-2d``: tiles block-cyclic over a 2 × size/2 rank grid along the first two
      tile axes (a 1-D grid for an odd rank count);
    - ``data``: parameters tile-cyclic; every activation's batch tiles block-cyclic over the
      ranks, so each rank runs the forward and backward of its part of the batch and the
      weight-gradient tasks sum the parts on the gradient tiles' owners."""
    if name == "operator":
        return TileCyclic(), None
    if name == "operator-2d":
        grid = (2, size // 2) if size % 2 == 0 else (size, 1)
        return BlockCyclic(axes=(0, 1), grid=grid), None
    if name == "data":
        return TileCyclic(), BlockCyclic(axes=(0,))
    raise ValueError(f"layout {name!r}: choose one of {', '.join(LAYOUTS)}")


def scope(mpi, distribution: Distribution | None):
    """``mpi.distribute(distribution)``, or nothing on one process / for None."""
    if mpi is None or distribution is None:
        return contextlib.nullcontext()
    return mpi.distribute(distribution)
