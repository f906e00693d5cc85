"""Distributed tiles over StarPU-MPI: every tile has an owner rank.

Under ``mpirun`` (more than one rank, or ``NNTILE_LAB_MPI=1``) a :class:`~nntile_lab.Runtime`
starts StarPU-MPI; every rank then creates the same tensors and submits the same tasks (SPMD).
Each tile is registered on every rank with ``starpu_mpi_data_register`` under one tag and an
owner given by the current :class:`Distribution`; a task runs on the owner of the tile it
writes and StarPU-MPI sends it the tiles it reads. ``to_numpy`` gives every rank the whole
tensor (each tile from its owner), then flushes the received copies; ``Runtime.wait`` (every
rank, same point) waits for all tasks and transfers and flushes every received copy, so a
rank holds its own tiles plus what one step brought in.

Distributions (``with rt.mpi.distribute(BlockCyclic(axes=(0,))): ...``):

- ``OnRank(r)``: every tile on rank r;
- ``Replicated()``: each rank owns its own copy (only tasks whose inputs are replicated too may
  write it: every rank then runs them, and no tile moves);
- ``BlockCyclic(axes, grid, block)``: tile (i₀, i₁, …) goes to rank
  Σⱼ ((i_{axes[j]} // block) mod grid[j]) · Πₖ<ⱼ grid[k], a block-cyclic map of the chosen
  grid axes onto a rank grid (default: one axis over all ranks);
- ``TileCyclic()`` (default): flat tile index mod ranks — spreads every tensor's tiles.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import traceback
from dataclasses import dataclass

from nntile_lab._lib import ffi, lib


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


def wanted() -> bool:
    """StarPU-MPI for this process? ``NNTILE_LAB_MPI`` (1/0) decides; else yes under
    mpirun with more than one rank."""
    flag = os.environ.get("NNTILE_LAB_MPI")
    if flag is not None:
        if flag not in ("0", "1"):
            raise ValueError(f"NNTILE_LAB_MPI={flag!r} must be 0 or 1")
        return flag == "1"
    return int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))) > 1


class MPIContext:
    """StarPU-MPI state of one running Runtime (``rt.mpi``); ``None`` on a single process."""

    def __init__(self):
        if not lib.nl_mpi_available():
            raise RuntimeError("this build of nntile_lab has no StarPU-MPI: install "
                               "libopenmpi-dev (scripts/setup.sh test) and rebuild "
                               "(python kernels/build.py)")
        rank, size = ffi.new("int *"), ffi.new("int *")
        ret = lib.nl_mpi_init(rank, size)
        if ret:
            raise RuntimeError(f"starpu_mpi_init failed with code {ret}")
        self.rank, self.size = rank[0], size[0]
        self.distribution: Distribution = TileCyclic()
        self._next_tag = 0

    # ---- tiles -------------------------------------------------------------
    @contextlib.contextmanager
    def distribute(self, distribution: Distribution):
        """Tensors created inside get their owners from ``distribution``."""
        if not isinstance(distribution, Distribution):
            raise TypeError(f"{distribution!r} is not a Distribution (OnRank, Replicated, "
                            "BlockCyclic, TileCyclic)")
        saved, self.distribution = self.distribution, distribution
        try:
            yield self
        finally:
            self.distribution = saved

    def register(self, tensor) -> None:
        """Owners for the new ``tensor``'s tiles; one tag per tile, equal on every rank
        because every rank creates the same tensors in the same order."""
        owners = self.distribution.owners(tensor.traits.grid_shape, self.size, self.rank)
        n = len(owners)
        lib.nl_mpi_register_tiles(n, tensor.handles, ffi.new("int[]", owners),
                                  self._next_tag)
        self._next_tag += n
        tensor.owners = owners
        tensor.replicated = self.distribution.replicated

    def gather(self, tensor) -> None:
        """Send every tile of ``tensor`` from its owner to all ranks."""
        if not tensor.storage.replicated:
            lib.nl_mpi_get_all(tensor.traits.ntiles, tensor.handles)

    def flush(self, tensor) -> None:
        """Drop the copies received from other ranks (every rank, same point of the flow)."""
        if not tensor.storage.replicated:
            lib.nl_mpi_flush(tensor.traits.ntiles, tensor.handles)

    # ---- life cycle --------------------------------------------------------
    def wait_for_all(self) -> None:
        ret = lib.nl_mpi_wait_for_all()
        if ret:
            raise RuntimeError(f"starpu_mpi_wait_for_all failed with code {ret}")

    def barrier(self) -> None:
        lib.nl_mpi_barrier()

    def shutdown(self) -> None:
        lib.nl_mpi_shutdown()

    def abort(self, exc: BaseException | None = None, code: int = 1) -> None:
        """End every rank now (MPI_Abort): an error on one rank must not leave the others
        waiting for its tiles. Prints the error first."""
        if exc is not None:
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        print(f"nntile_lab: rank {self.rank} failed: aborting all {self.size} ranks",
              file=sys.stderr, flush=True)
        lib.nl_mpi_abort(code)

    def __repr__(self) -> str:
        return f"MPIContext(rank={self.rank}, size={self.size}, {self.distribution!r})"


def attach() -> MPIContext | None:
    """Called by Runtime.start once StarPU runs. An exception that ends the program on one
    rank aborts all of them (the default hook would leave the others waiting)."""
    if not wanted():
        return None
    ctx = MPIContext()
    previous = sys.excepthook

    def hook(kind, exc, tb):
        previous(kind, exc, tb)
        if lib.nl_mpi_available():
            ctx.abort(None)
    sys.excepthook = hook
    return ctx
