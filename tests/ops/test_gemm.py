import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import cond_err
from tests.strategies import gemm_case, gemm_layouts, gemm_reference

RNG = np.random.default_rng(1)


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]))
def test_gemm_matches_numpy(rt, case, alpha, beta):
    dims, tiles, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = RNG.standard_normal(a_shape).astype(np.float32)
    b = RNG.standard_normal(b_shape).astype(np.float32)
    c0 = RNG.standard_normal(c_shape).astype(np.float32)
    nb, nk = len(dims["b"]), len(dims["k"])
    want, magnitude = gemm_reference(case, a, b, c0, alpha, beta)
    out = nl.from_numpy(c0, c_tiles) if beta else None
    got = nl.ops.gemm(nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles), trans_a=ta,
                      trans_b=tb, alpha=alpha, beta=beta, out=out, ndim=nk, batch_ndim=nb)
    assert got.shape == c_shape and got.tile_shape == c_tiles
    assert cond_err(got.to_numpy(), want, magnitude) <= 1e-5


def test_gemm_rejects_mismatch(rt1):
    a = nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"contracted \(k\) dimensions differ.*\(5,\)"):
        nl.ops.gemm(a, nl.zeros((5, 2)))
    with pytest.raises(ValueError, match=r"tiles \(3,\).*tiles \(2,\)"):
        nl.ops.gemm(a, nl.zeros((6, 2), (2, 2)))
    with pytest.raises(ValueError, match="beta=1.0 .* pass out="):
        nl.ops.gemm(a, nl.zeros((6, 2), (3, 2)), beta=1.0)
    with pytest.raises(TypeError, match="int64"):
        nl.ops.gemm(nl.zeros((4, 6), dtype=np.int64), nl.zeros((6, 2)))
    with pytest.raises(ValueError, match="out is .* needs shape"):
        nl.ops.gemm(a, nl.zeros((6, 2), (3, 2)), out=nl.zeros((4, 3)))
