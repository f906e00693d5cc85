"""CuPy interop (issue 18 §5): ``TiledTensor.to_cupy()`` / ``nl.from_cupy()``.

Here (Debian's StarPU without CUDA, no GPU, CuPy maybe absent) each is one clear error
naming every missing piece and its fix, before anything is touched. The GPU path is
tests/ops/test_cuda.py (marker ``cuda``, docs/accelerators.md)."""
import importlib.util

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.runtime import CudaUnavailable

HAVE_CUPY = importlib.util.find_spec("cupy") is not None


def _expected_parts():
    parts = []
    if not lib.nl_cuda_built():
        parts.append(r"this StarPU has no CUDA .*scripts/build_starpu_cuda\.sh")
    if not HAVE_CUPY:
        parts.append(r"CuPy is not installed: pip install cupy-cuda13x")
    return parts


def test_to_cupy_without_cuda_says_what_is_missing(rt1):
    x = nl.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), (2, 4))
    with pytest.raises(CudaUnavailable, match=r"to_cupy hands tiles in GPU memory to CuPy") as e:
        x.to_cupy()
    parts = _expected_parts() or [r"has no CUDA worker: start it with Runtime\(ncuda=1\)"]
    for part in parts:
        assert e.match(part)
    # nothing was held: the tensor is whole and usable
    np.testing.assert_array_equal(x.to_numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_from_cupy_without_cuda_says_what_is_missing(rt1):
    with pytest.raises(CudaUnavailable, match=r"from_cupy hands tiles in GPU memory") as e:
        nl.from_cupy(np.zeros((2, 2), np.float32))
    for part in _expected_parts():
        assert e.match(part)


def test_from_cupy_with_no_runtime_names_the_runtime_too():
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with pytest.raises(CudaUnavailable) as e:
        nl.from_cupy(np.zeros((2, 2), np.float32))
    want = _expected_parts() or [r"no runtime is running: start one with Runtime\(ncuda=1\)"]
    for part in want:
        assert e.match(part)
