"""``kill -9`` of ``nntile-lab proxy`` or ``collectives`` at a random moment leaves no MPI
rank and no mpirun (mpirun dies with its parent, each rank with mpirun:
nntile_lab.orphans). Every child has a time limit (the commands' own --timeout, and
kill_at_random's bounds)."""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import require
from tests.faults.test_kills import kill_at_random


@pytest.fixture(autouse=True)
def _mpi():
    """Open MPI and mpi4py are installed by `scripts/setup.sh test`: missing, fail loudly."""
    require("mpi4py")
    assert shutil.which("mpirun"), "mpirun is missing: scripts/setup.sh test installs Open MPI"


@pytest.mark.parametrize("run", range(2))
def test_killing_collectives_leaves_no_rank(tmp_path, run):
    # the largest sizes take seconds per operation: ranks still run when the kill comes
    moment, left = kill_at_random(["collectives", "--ranks", "2", "--min-bytes", "8",
                                   "--max-bytes", str(256 * 2**20), "--timeout", "120"],
                                  (0.0, 3.0), tmp_path, seed=20 + run)
    assert not left, (f"killed {moment:.2f} s in: left "
                      f"{[' '.join(p.cmdline()[:4]) for p in left]}")


@pytest.mark.parametrize("run", range(2))
def test_killing_a_proxy_replay_leaves_no_rank(tmp_path, run):
    moment, left = kill_at_random(["proxy", "gpt2", "--data", "2", "--iterations", "100000",
                                   "--timeout", "120"], (0.0, 3.0), tmp_path,
                                  seed=30 + run)
    assert not left, (f"killed {moment:.2f} s in: left "
                      f"{[' '.join(p.cmdline()[:4]) for p in left]}")
