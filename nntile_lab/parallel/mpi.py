"""Distributed tiles over StarPU-MPI: every tile has an owner rank.

Under ``mpirun`` (more than one rank, or ``NNTILE_LAB_MPI=1``) a :class:`~nntile_lab.Runtime`
starts StarPU-MPI; every rank then creates the same tensors and submits the same tasks (SPMD).
Each tile is registered on every rank with ``starpu_mpi_data_register`` under one tag and an
owner given by the current :class:`Distribution`; a task runs on the owner of the tile it
writes and StarPU-MPI sends it the tiles it reads. ``to_numpy`` gives every rank the whole
tensor (each tile from its owner), then flushes the received copies; ``Runtime.wait`` (every
rank, same point) waits for all tasks and transfers and flushes every received copy, so a
rank holds its own tiles plus what one step brought in. The distributions (who owns which
tile) and the training layouts are in :mod:`nntile_lab.parallel.distribution`.
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import traceback

from nntile_lab._lib import ffi, lib
from nntile_lab.parallel.distribution import (  # noqa: F401 (the names users import from here)
    LAYOUTS,
    BlockCyclic,
    Distribution,
    OnRank,
    Replicated,
    TileCyclic,
    layout,
    scope,
)


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

    # ---- what crossed the network ------------------------------------------
    def bytes_sent(self) -> list[int]:
        """Bytes this rank has sent to each rank since StarPU-MPI started (StarPU-MPI's own
        count of the payloads it hands to MPI)."""
        out = ffi.new("int64_t[]", self.size)
        lib.nl_mpi_comm_bytes(out)
        return list(out)

    def gather_rows(self, row) -> list[list[int]] | None:
        """Every rank's ``row`` (equal-length int64s) on rank 0, None elsewhere; a collective:
        every rank calls it at the same point of the flow."""
        n = len(row)
        mine = ffi.new("int64_t[]", [int(v) for v in row])
        all_rows = ffi.new("int64_t[]", n * self.size)
        ret = lib.nl_mpi_gather_rows(n, mine, all_rows, self._next_tag)
        self._next_tag += self.size
        if ret:
            raise RuntimeError(f"gathering {n} values per rank failed with code {ret}")
        if self.rank != 0:
            return None
        return [list(all_rows[r * n:(r + 1) * n]) for r in range(self.size)]

    def shutdown(self) -> None:
        lib.nl_mpi_shutdown()

    def abort(self, exc: BaseException | None = None, code: int = 1) -> None:
        """End every rank now (MPI_Abort): an error on one rank must not leave the others
        waiting for its tiles. Prints the error first."""
        if exc is not None:
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        print(f"nntile_lab: rank {self.rank} on host {socket.gethostname()} failed: aborting "
              f"all {self.size} ranks", file=sys.stderr, flush=True)
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
