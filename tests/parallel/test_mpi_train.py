"""GPT-2 training over StarPU-MPI (mpirun -n 2 and -n 4, one CPU worker per rank) against
one process: equal losses, checkpoint/resume across rank counts, a dying rank ends all."""
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.parallel.test_mpi_tiles import HERE, REPO, mpirun
from tests.torch_adapter import tiny_dataset

TOL = 1e-5


def single(out, *args):
    proc = subprocess.run([sys.executable, str(HERE / "mpi_train.py"), str(out), *args],
                          capture_output=True, text=True, timeout=180, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "STARPU_SILENT": "1",
                               "PATH": os.environ["PATH"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(Path(out).read_text())


def distributed(n, out, *args):
    proc = mpirun(n, "mpi_train.py", str(out), *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    res = json.loads(Path(out).read_text())
    assert res["ranks"] == n
    return res


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return single(tmp_path_factory.mktemp("ref") / "one.json", "tile-cyclic", "--steps", "5")


@pytest.mark.slow
@pytest.mark.parametrize("n,dist", [(2, "tile-cyclic"), (4, "weights-2d"), (4, "tile-cyclic"),
                                    (2, "data-parallel"), (4, "data-parallel")])
def test_operator_parallel_losses_equal_one_rank(n, dist, reference, tmp_path):
    res = distributed(n, tmp_path / "r.json", dist, "--steps", "5")
    assert len(res["losses"]) == 5 and res["losses"][-1] < res["losses"][0]
    np.testing.assert_allclose(res["losses"], reference["losses"], rtol=0, atol=TOL)
    # the weight tiles really are spread: every rank owns some
    assert min(res["param_tiles_per_rank"]) > 0, res["param_tiles_per_rank"]


@pytest.mark.slow
def test_checkpoint_from_two_ranks_resumes_on_four(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    single(tmp_path / "a.json", "tile-cyclic", "--steps", "3", "--save", str(one))
    distributed(2, tmp_path / "b.json", "tile-cyclic", "--steps", "3", "--save", str(two))
    a = np.load(one / "checkpoint" / "model.npz")
    b = np.load(two / "checkpoint" / "model.npz")
    assert sorted(a.files) == sorted(b.files)
    # parameters after 3 AdamW steps (lr 1e-2): a gradient near 0 summed in another order
    # (commuting accumulations arrive in any order across ranks) moves m/√v by up to ~1e-3 of
    # the step; 1e-4 is 1% of one step, while a lost update would differ by ~1e-2
    for k in a.files:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-4, err_msg=k)
    ref = single(tmp_path / "c.json", "tile-cyclic", "--steps", "2", "--resume", str(one))
    res = distributed(4, tmp_path / "d.json", "weights-2d", "--steps", "2", "--resume", str(two))
    np.testing.assert_allclose(res["losses"], ref["losses"], rtol=0, atol=TOL)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--die-at-step", "--raise-at-step"])
def test_a_dying_rank_ends_every_rank(how, tmp_path):
    proc = mpirun(4, "mpi_train.py", str(tmp_path / "x.json"), "tile-cyclic", "--steps", "5",
                  how, "2", "--die-rank", "1", timeout=120)
    ended = time.time()
    assert proc.returncode != 0
    # from the moment rank 1 died (its start on a loaded machine is not the point)
    took = ended - float((tmp_path / "x.json.died").read_text())
    assert took < 30, f"the other ranks took {took:.0f} s to end"
    assert not (tmp_path / "x.json").exists()


def _losses(run: Path) -> list[float]:
    with open(run / "log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r.get("loss")]


@pytest.mark.slow
def test_train_cli_ranks(tmp_path):
    data = tiny_dataset(tmp_path / "data")
    opts = ["--data", str(data), "--n-layer", "1", "--n-head", "2", "--n-embd", "32",
            "--vocab-size", "64", "--seq-len", "16", "--batch", "4", "--steps", "4",
            "--eval-every", "2", "--eval-batches", "2", "--embd-tile", "16",
            "--vocab-tile", "32", "--batch-tile", "2", "--no-progress", "--scheduler", "eager"]
    env = {"PYTHONPATH": str(REPO), "STARPU_SILENT": "1", "PATH": os.environ["PATH"]}
    cli = [sys.executable, "-m", "nntile_lab.cli", "train"]
    line = subprocess.run(cli + opts + ["--ranks", "2", "--print-mpirun"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)
    assert line.returncode == 0, line.stderr
    assert "mpirun -n 2 --oversubscribe" in line.stdout and "--ncpu 1" in line.stdout
    assert "-x NNTILE_LAB_MPI=1" in line.stdout and "--ranks" not in line.stdout
    one = subprocess.run(cli + opts + ["--ncpu", "1", "--out", "one"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=180)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run(cli + opts + ["--ranks", "2", "--out", "two"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=180)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "mpirun" in two.stderr and two.stdout.count("4 steps") == 1   # rank 0 reports
    a, b = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(a) >= 1 and len(a) == len(b)
    np.testing.assert_allclose(b, a, rtol=0, atol=TOL)
    assert (tmp_path / "two" / "checkpoint").is_dir()
