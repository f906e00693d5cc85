"""The bf16 gemm (oneDNN) from several StarPU workers at once, one thread per task: a
library state shared between concurrent calls (a scratchpad, a stream, a JIT cache being
filled) would give wrong products here."""
import ml_dtypes
import numpy as np
import pytest

import nntile_lab as nl
from tests.tolerance import rel_err


def test_gemm_bf16_concurrency_stress():
    """128² tiles of a 512² product, every trans pair, on all workers, 20 times each:
    every product must equal the float64 product of the same bf16 values to float32
    accumulation's accuracy."""
    rng = np.random.default_rng(22)
    n, tile = 512, 128
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    wrong = []
    with nl.Runtime(scheduler="eager") as rt:
        assert rt.nworkers >= 2 or pytest.fail("the stress test needs ≥ 2 workers")
        ta, tb = nl.from_numpy(a, (tile, tile)), nl.from_numpy(b, (tile, tile))
        for trans_a, trans_b in ((False, False), (False, True), (True, False), (True, True)):
            want = (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)
            for trial in range(20):
                got = nl.ops.gemm(ta, tb, trans_a=trans_a, trans_b=trans_b).to_numpy()
                if (e := rel_err(got, want)) > 1e-5:
                    wrong.append((trans_a, trans_b, trial, e))
    assert not wrong, f"{len(wrong)} of 80 tiled bf16 products were wrong: {wrong[:5]}"


def test_gemm_bf16_many_shapes_at_once():
    """Small products of many different shapes in flight together: each new shape makes
    oneDNN create a primitive while other workers run theirs."""
    rng = np.random.default_rng(5)
    cases = []
    with nl.Runtime(scheduler="eager") as rt:
        assert rt.nworkers >= 2 or pytest.fail("the stress test needs ≥ 2 workers")
        for _ in range(200):
            m, n, k = (int(v) for v in rng.integers(1, 40, 3))
            a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
            b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
            tiles = tuple(int(rng.integers(1, s + 1)) for s in (m, k))
            c = nl.ops.gemm(nl.from_numpy(a, tiles), nl.from_numpy(b, (tiles[1], n)))
            cases.append((c, a.astype(np.float64) @ b.astype(np.float64)))
        errors = [rel_err(c.to_numpy(), want) for c, want in cases]
    wrong = [(i, e) for i, e in enumerate(errors) if e > 1e-5]
    assert not wrong, f"{len(wrong)} of 200 products were wrong: {wrong[:5]}"
