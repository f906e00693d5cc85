import numpy as np
import pytest

import nntile_lab as nl
from tests.conftest import rel_err


def test_gemm_concurrency_stress():
    """Many 128² tiles on all workers, 50 times: a BLAS that is not thread-safe
    (Debian's serial OpenBLAS) gives wrong products here."""
    rng = np.random.default_rng(7)
    n, tile = 512, 128
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    want = a.astype(np.float64) @ b
    with nl.Runtime(scheduler="eager") as rt:
        assert rt.nworkers >= 2 or pytest.fail("the stress test needs ≥ 2 workers")
        ta, tb = nl.from_numpy(a, (tile, tile)), nl.from_numpy(b, (tile, tile))
        errors = [rel_err(nl.ops.gemm(ta, tb).to_numpy(), want) for _ in range(50)]
    wrong = [e for e in errors if e > 1e-5]
    assert not wrong, f"{len(wrong)} of 50 tiled sgemm runs were wrong: {wrong[:5]}"
