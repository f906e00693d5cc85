"""Distributed tiles over StarPU-MPI under mpirun -n 2 and -n 4, and the owner maps."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nntile_lab.parallel.mpi import BlockCyclic, OnRank, Replicated, TileCyclic, wanted
from nntile_lab.parallel.mpirun import mpirun_command

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def mpirun(n: int, script: str, *args, timeout: float = 180, env=None):
    """Run ``script`` on ``n`` ranks (one StarPU CPU worker each); returns the process."""
    full = dict(os.environ, PYTHONPATH=str(REPO), STARPU_NCPU="1", STARPU_SILENT="1",
                **(env or {}))
    cmd = mpirun_command(n, [sys.executable, str(HERE / script), *args])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full,
                          cwd=REPO)


@pytest.mark.parametrize("n", [2, 4])
def test_distributed_gemm_and_add(n, tmp_path):
    proc = mpirun(n, "mpi_tiles.py", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    done = sorted(p.name for p in tmp_path.glob("rank_ok.*"))
    assert done == [f"rank_ok.{r}" for r in range(n)], proc.stdout[-3000:] + proc.stderr[-3000:]


def test_owner_maps():
    assert OnRank(1).owners((2, 3), 4, 0) == [1] * 6
    assert Replicated().owners((2, 2), 4, 3) == [3] * 4
    assert TileCyclic().owners((2, 3), 4, 0) == [0, 1, 2, 3, 0, 1]
    # 2-D block-cyclic over a 2×2 rank grid: rank = (i mod 2) + 2·(j mod 2)
    assert BlockCyclic(axes=(0, 1), grid=(2, 2)).owners((3, 3), 4, 0) == [
        0, 2, 0, 1, 3, 1, 0, 2, 0]
    # blocks of 2 tiles along axis 1 over 2 ranks
    assert BlockCyclic(axes=(1,), block=2).owners((1, 6), 2, 0) == [0, 0, 1, 1, 0, 0]
    # an axis the tensor lacks counts as block 0
    assert BlockCyclic(axes=(2,)).owners((2,), 2, 0) == [0, 0]
    with pytest.raises(ValueError, match="product is 4"):
        BlockCyclic(axes=(0, 1), grid=(3, 1)).owners((2, 2), 4, 0)
    with pytest.raises(ValueError, match="OnRank\\(5\\)"):
        OnRank(5).owners((1,), 2, 0)


def test_single_process_has_no_mpi(monkeypatch):
    monkeypatch.delenv("NNTILE_LAB_MPI", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE", raising=False)
    monkeypatch.delenv("PMI_SIZE", raising=False)
    assert not wanted()
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert wanted()
    monkeypatch.setenv("NNTILE_LAB_MPI", "0")
    assert not wanted()
    monkeypatch.setenv("NNTILE_LAB_MPI", "yes")
    with pytest.raises(ValueError, match="NNTILE_LAB_MPI"):
        wanted()


def test_submit_cost_measures():
    from nntile_lab.bench.submit_cost import measure
    r = measure(tasks=2000, repeats=2)
    assert r["mpi_built"] and 0 < r["min_us"] <= r["median_us"] < 1000


def test_train_ranks_zero_is_refused(capsys):
    from nntile_lab.cli import main
    assert main(["train", "--ranks", "0"]) == 2
    err = capsys.readouterr().err
    assert "--ranks: 0 is out of range" in err and "from 1" in err
