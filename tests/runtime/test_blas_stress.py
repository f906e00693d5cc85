import numpy as np
import pytest

import nntile_lab as nl
from tests.tolerance import rel_err


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


@pytest.mark.slow
def test_transposed_transposed_gemm_from_two_workers():
    """Small sgemm(Trans, Trans) on two workers at once: scipy-openblas32 0.3.34 gives
    wrong products and corrupts the heap there (scripts/openblas_tt_race.c), so the gemm
    kernel must not call it. Before the kernel avoided it, 1 in ~400 of these products
    (96 tasks each, 6 accumulated into every output tile) came out wrong or crashed."""
    rng = np.random.default_rng(11)
    # c[b, m, 1, n] = Σ_k a[b, k1, k2, m] · bt[b, 1, n, k1, k2]: both operands transposed
    a_shape, a_tiles = (2, 7, 3, 9), (1, 3, 2, 7)
    b_shape, b_tiles = (2, 1, 7, 7, 3), (1, 1, 2, 3, 2)
    c_shape, c_tiles = (2, 9, 1, 7), (1, 7, 1, 2)
    wrong = []
    with nl.Runtime(scheduler="eager", ncpu=2) as rt:
        assert rt.nworkers >= 2 or pytest.fail("the stress test needs ≥ 2 workers")
        for trial in range(1500):
            a = rng.standard_normal(a_shape).astype(np.float32)
            b = rng.standard_normal(b_shape).astype(np.float32)
            c0 = rng.standard_normal(c_shape).astype(np.float32)
            a2 = a.astype(np.float64).reshape(2, 21, 9).transpose(0, 2, 1)
            b2 = b.astype(np.float64).reshape(2, 7, 21).transpose(0, 2, 1)
            want = (-0.5 * np.matmul(a2, b2)).reshape(c_shape) + c0
            got = nl.ops.gemm(nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles),
                              trans_a=True, trans_b=True, alpha=-0.5, beta=1.0,
                              out=nl.from_numpy(c0, c_tiles), ndim=2, batch_ndim=1)
            if (e := rel_err(got.to_numpy(), want)) > 1e-5:
                wrong.append((trial, e))
    assert not wrong, f"{len(wrong)} of 1500 products were wrong: {wrong[:5]}"
