import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.strategies import gemm_case, gemm_layouts, gemm_reference, gemm_ulps, seeds
from tests.tolerance import U32, U_BF16, assert_close


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]), seeds())
def test_gemm_matches_numpy(rt, case, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    dims, tiles, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    c0 = rng.standard_normal(c_shape).astype(np.float32)
    nb, nk = len(dims["b"]), len(dims["k"])
    want, magnitude = gemm_reference(case, a, b, c0, alpha, beta)
    out = nl.from_numpy(c0, c_tiles) if beta else None
    got = nl.ops.gemm(nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles), trans_a=ta,
                      trans_b=tb, alpha=alpha, beta=beta, out=out, ndim=nk, batch_ndim=nb)
    assert got.shape == c_shape and got.tile_shape == c_tiles
    assert_close(got.to_numpy(), want, magnitude, ulps=gemm_ulps(case), what=case)


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


# ---- a product stored in bf16 (the bf16 precision modes' logits) -----------------------
BF16 = np.dtype(ml_dtypes.bfloat16)


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.booleans(), seeds())
def test_gemm_with_bf16_c_rounds_float32_sums_once(rt, case, alpha, bf16_ab, seed):
    """c = bf16(α·op(a)·op(b)), the contracted dims in one tile: from bf16 a and b
    (gemm_bf16_c16, oneDNN writes the bf16 c) or float32 ones (gemm_c16). Against float64
    products of the same operand values: float32 accumulation (γ_k of the magnitude)
    plus one rounding to nearest, at most 2^-8 of each value (half a bf16 ulp)."""
    rng = np.random.default_rng(seed)
    dims, tiles, ta, tb = case
    tiles = {**tiles, "k": list(dims["k"])}            # one k tile: c is written once
    case = dims, tiles, ta, tb
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    if bf16_ab:
        a, b = a.astype(BF16), b.astype(BF16)
    nb, nk = len(dims["b"]), len(dims["k"])
    ta_, tb_ = nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles)
    got = nl.ops.gemm(ta_, tb_, trans_a=ta, trans_b=tb, alpha=alpha, ndim=nk, batch_ndim=nb,
                      out_dtype=BF16)
    assert got.dtype == BF16 and got.shape == c_shape and got.tile_shape == c_tiles
    got = got.to_numpy().astype(np.float64)
    want, magnitude = gemm_reference(case, a, b, np.zeros(c_shape, np.float32), alpha, 0.0)
    # one bf16 rounding of each value (in bf16 units), plus the float32 sums' γ_k of the
    # magnitude (in float32 units, converted)
    assert_close(got, want, abs(want) + gemm_ulps(case) * (U32 / U_BF16) * magnitude,
                 ulps=1, unit=U_BF16, what=case)
    # the same float32 sums as the float32-output product, rounded once (gemm_c16 runs
    # the very sgemm call: bit-identical)
    c32 = nl.ops.gemm(ta_, tb_, trans_a=ta, trans_b=tb, alpha=alpha, ndim=nk,
                      batch_ndim=nb).to_numpy()
    if not bf16_ab:
        assert np.array_equal(got, c32.astype(BF16).astype(np.float64))


def test_gemm_with_bf16_c_refuses_what_it_cannot_store(rt1):
    a16 = nl.ops.to_bf16(nl.zeros((4, 6), (2, 3)))
    b16 = nl.ops.to_bf16(nl.zeros((6, 2), (3, 2)))
    with pytest.raises(ValueError, match="bfloat16 c needs the contracted dimensions in one "
                                         "tile.*a has 2 tiles there"):
        nl.ops.gemm(a16, b16, out_dtype=BF16)
    a16 = nl.ops.to_bf16(nl.zeros((4, 6), (2, 6)))
    b16 = nl.ops.to_bf16(nl.zeros((6, 2), (6, 2)))
    c16 = nl.ops.gemm(a16, b16, out_dtype=BF16)
    with pytest.raises(ValueError, match=r"beta=1.0 with a bfloat16 c.*float32 out"):
        nl.ops.gemm(a16, b16, out=c16, beta=1.0)
    with pytest.raises(TypeError, match="out is bfloat16 but out_dtype=float32"):
        nl.ops.gemm(a16, b16, out=c16, out_dtype=np.float32)
    with pytest.raises(TypeError, match="c must be float32 or bfloat16, got float64"):
        nl.ops.gemm(a16, b16, out_dtype=np.float64)
    nl.ops.gemm(a16, b16, out=c16, alpha=2.0)                 # beta 0: overwritten
    assert c16.to_numpy().astype(np.float32).max() == 0.0


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]), seeds())
def test_gemm_of_bf16_a_and_float32_b(rt, case, alpha, beta, seed):
    """bf16 a, float32 b and c (gemm_a16: a widened inside the task, then sgemm): the
    float32 product of a's exact float32 values, bit for bit, over any tiling."""
    rng = np.random.default_rng(seed)
    dims, tiles, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = rng.standard_normal(a_shape).astype(BF16)
    b = rng.standard_normal(b_shape).astype(np.float32)
    c0 = rng.standard_normal(c_shape).astype(np.float32)
    nb, nk = len(dims["b"]), len(dims["k"])
    kw = dict(trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, ndim=nk, batch_ndim=nb)
    got = nl.ops.gemm(nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles),
                      out=nl.from_numpy(c0, c_tiles) if beta else None, **kw)
    assert got.dtype == np.float32 and got.tile_shape == c_tiles
    got = got.to_numpy()
    want, magnitude = gemm_reference(case, a, b, c0, alpha, beta)
    assert_close(got, want, magnitude, ulps=gemm_ulps(case), what=case)
    same = nl.ops.gemm(nl.from_numpy(a.astype(np.float32), a_tiles), nl.from_numpy(b, b_tiles),
                       out=nl.from_numpy(c0, c_tiles) if beta else None, **kw).to_numpy()
    assert np.array_equal(got, same)
    with pytest.raises(TypeError, match="bfloat16 a with a float32 b makes a float32 c"):
        nl.ops.gemm(nl.from_numpy(a, a_tiles), nl.from_numpy(b, b_tiles), out_dtype=BF16, **kw)
