"""CUDA workers (issue 18 §5): ``Runtime(ncuda=N)`` and ``on("cuda")`` on this build.

Debian's StarPU has no CUDA: asking for CUDA workers is one clear error, naming the script
that builds a StarPU with CUDA, before StarPU starts. Against a StarPU with CUDA
(scripts/build_starpu_cuda.sh) the same tests check the other branch: more workers than GPUs
is the error. The GPU runs themselves are tests/ops/test_cuda.py (marker ``cuda``)."""
import subprocess
import sys

import pytest

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.runtime import CudaUnavailable, cuda_devices
from nntile_lab.spec import ExperimentSpec


def _stop_active():
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()


def test_asking_for_cuda_workers_beyond_what_exists_fails_before_starpu_starts():
    _stop_active()
    if lib.nl_cuda_built():
        ask = cuda_devices() + 1
        with pytest.raises(CudaUnavailable, match=rf"ncuda={ask} but this machine shows "
                                                  r"\d+ CUDA device.*nvidia-smi -L"):
            nl.Runtime(ncpu=1, ncuda=ask)
    else:
        assert cuda_devices() == 0
        with pytest.raises(CudaUnavailable, match=r"ncuda=1: this StarPU has no CUDA .*"
                                                  r"scripts/build_starpu_cuda\.sh"):
            nl.Runtime(ncpu=1, ncuda=1)
    assert nl.Runtime.active is None   # nothing started, nothing left to stop
    assert issubclass(CudaUnavailable, ValueError)   # callers catching ValueError still do


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_ncuda_must_be_a_count(bad):
    with pytest.raises(ValueError, match=r"ncuda=.* must be an integer ≥ 0"):
        nl.Runtime(ncpu=1, ncuda=bad)


def test_cuda_confinement_needs_cuda_workers():
    _stop_active()
    with nl.Runtime(ncpu=1) as rt:
        assert "ncuda" not in repr(rt)
        with pytest.raises(ValueError, match=r"on\('cuda'\) needs CUDA workers: .*"
                                             r"Runtime\(ncuda=1\)"), rt.on("cuda"):
            pass
        assert rt.where == "any"
        with pytest.raises(CudaUnavailable, match=r"has no CUDA worker: start it with ncuda=1"):
            rt.cuda_memory_node()


def test_the_spec_and_cli_carry_ncuda():
    assert ExperimentSpec(ncuda=2).runtime_kwargs()["ncuda"] == 2
    assert "ncuda" not in ExperimentSpec().runtime_kwargs()
    with pytest.raises(ValueError, match=r"ncuda=-1 \(--ncuda\) must be ≥ 0"):
        ExperimentSpec(ncuda=-1)


def test_train_with_ncuda_on_a_starpu_without_cuda_stops_before_any_work(tmp_path):
    if lib.nl_cuda_built():   # the other branch: a StarPU with CUDA takes --ncuda
        assert ExperimentSpec(ncuda=1).runtime_kwargs()["ncuda"] == 1
        return
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train", "--ncuda", "1",
                           "--steps", "1", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "ncuda=1: this StarPU has no CUDA" in done.stderr
    assert "scripts/build_starpu_cuda.sh" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
