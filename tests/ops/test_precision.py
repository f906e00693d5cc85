"""bf16: the float32 <-> bfloat16 conversions, the bf16 gemm (oneDNN; sgemm on widened
copies where the CPU has no bf16 matmul) and GELU with bf16 storage against float64
references, over random shapes and tilings."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.ops.elementwise_ref import gelu, gelu_derivative
from tests.strategies import (
    gemm_case,
    gemm_layouts,
    gemm_reference,
    gemm_ulps,
    seeds,
    shape_and_tiles,
)
from tests.tolerance import U32, U_BF16, assert_close, dot_ulps

ROOT = Path(__file__).resolve().parents[2]
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


def _rne_reference(x: np.ndarray) -> np.ndarray:
    """bf16 bits of float32 ``x`` rounded to nearest, ties to even, in float64 arithmetic:
    the two neighbouring bf16 values, the nearer one, the one with an even last bit on a
    tie (an independent check of ml_dtypes and of the kernel). Finite x only."""
    u = x.view(np.uint32).astype(np.uint64)
    down = (u >> 16).astype(np.uint32)                       # towards zero
    up = down + 1                                            # away from zero
    as_f = lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    xd, lo, hi = x.astype(np.float64), as_f(down), as_f(up)
    # past bf16's largest value the next step up is 2^128 (IEEE rounds to inf only
    # from half an ulp beyond the largest): compare with it, not with inf
    hi = np.where(np.isinf(hi), np.sign(hi) * 2.0 ** 128, hi)
    dlo, dhi = np.abs(xd - lo), np.abs(hi - xd)
    pick_up = (dhi < dlo) | ((dhi == dlo) & (down % 2 == 1))
    return np.where(pick_up, up, down).astype(np.uint16)


def _values(rng, shape) -> np.ndarray:
    """float32 over bf16's whole range: wide magnitudes, exact ties (low half 0x8000, odd
    and even), subnormals, the largest finite floats (which round to ±inf), ±0."""
    n = int(np.prod(shape))
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-40, 38, n)).astype(np.float32)
    u = x.view(np.uint32)
    kind = rng.integers(0, 6, n)
    u[kind == 1] = (u[kind == 1] & 0xFFFF0000) | 0x8000            # a tie
    u[kind == 2] = rng.integers(0, 0x10000, (kind == 2).sum())       # +subnormal/tiny
    x[kind == 3] = np.float32(3.4e38) * rng.choice([-1, 1], (kind == 3).sum())
    x[kind == 4] = rng.choice([0.0, -0.0, 1.0, -2.5], (kind == 4).sum())
    return x.reshape(shape)


@given(shape_and_tiles(), seeds())
def test_to_bf16_rounds_to_nearest_even(rt, st_, seed):
    shape, tiles = st_
    x = _values(np.random.default_rng(seed), shape)
    got = nl.ops.to_bf16(nl.from_numpy(x, tiles)).to_numpy()
    assert got.dtype == BF16 and got.shape == shape
    want = _rne_reference(x.ravel()).reshape(shape)
    assert np.array_equal(_bits(got), want), "to_bf16 differs from round-to-nearest-even"
    assert np.array_equal(_bits(got), _bits(x.astype(BF16)))       # as ml_dtypes/PyTorch


@given(shape_and_tiles(), seeds())
def test_bf16_round_trip_is_exact(rt, st_, seed):
    shape, tiles = st_
    b = _values(np.random.default_rng(seed), shape).astype(BF16)
    back = nl.ops.to_f32(nl.from_numpy(b, tiles)).to_numpy()
    assert back.dtype == np.float32
    assert np.array_equal(back.view(np.uint32), b.astype(np.float32).view(np.uint32))
    again = nl.ops.to_bf16(nl.from_numpy(back, tiles)).to_numpy()
    assert np.array_equal(_bits(again), _bits(b))                   # widening loses nothing


def test_to_bf16_special_values(rt1):
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 3.3895314e38, 3.40282e38, -3.40282e38,
                  1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 2.0 ** -133], np.float32)
    # a signalling NaN whose payload lives in the low half only: it must stay a NaN
    x = np.append(x, np.array([0x7F800001], np.uint32).view(np.float32))
    got = nl.ops.to_bf16(nl.from_numpy(x)).to_numpy().astype(np.float32)
    assert np.isposinf(got[0]) and np.isneginf(got[1])
    assert np.isnan(got[2]) and np.isnan(got[3]) and np.isnan(got[10])
    assert got[4] == np.float32(3.3895314e38)                      # bf16's largest, kept
    assert np.isposinf(got[5]) and np.isneginf(got[6])             # beyond it: ±inf
    assert got[7] == 1.0 and got[8] == 1.0 + 2.0 ** -6             # ties to even, both ways
    assert got[9] == np.float32(2.0 ** -133)                       # subnormal, exact


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]), seeds())
def test_gemm_bf16_matches_float64(rt, case, alpha, beta, seed):
    """bf16 a and b, float32 c: against float64 products of the same bf16 values the only
    error is float32 accumulation (gemm's own γ_k); against the float32 values they
    were rounded from, two roundings of at most 2^-8 each per product."""
    rng = np.random.default_rng(seed)
    dims, tiles, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a32 = rng.standard_normal(a_shape).astype(np.float32)
    b32 = rng.standard_normal(b_shape).astype(np.float32)
    c0 = rng.standard_normal(c_shape).astype(np.float32)
    nb, nk = len(dims["b"]), len(dims["k"])

    def reference(a, b):
        return gemm_reference(case, a, b, c0, alpha, beta)

    ta_bf = nl.ops.to_bf16(nl.from_numpy(a32, a_tiles))
    tb_bf = nl.ops.to_bf16(nl.from_numpy(b32, b_tiles))
    out = nl.from_numpy(c0, c_tiles) if beta else None
    got = nl.ops.gemm(ta_bf, tb_bf, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, out=out,
                      ndim=nk, batch_ndim=nb)
    assert got.dtype == np.float32 and got.shape == c_shape and got.tile_shape == c_tiles
    got = got.to_numpy()
    want, magnitude = reference(ta_bf.to_numpy(), tb_bf.to_numpy())
    assert_close(got, want, magnitude, ulps=gemm_ulps(case), what=case)
    # from the float32 operands: each product's two bf16 roundings, in bf16 units
    want32, magnitude32 = reference(a32, b32)
    assert_close(got, want32, magnitude32, ulps=2 + U_BF16 + gemm_ulps(case) * U32 / U_BF16,
                 unit=U_BF16, what=case)


def test_bf16_rejects_mixed_and_unsupported(rt1):
    a = nl.ops.to_bf16(nl.zeros((4, 6), (2, 3)))
    with pytest.raises(TypeError, match="a is float32 and b is bfloat16.*ops.to_bf16"):
        nl.ops.gemm(nl.zeros((2, 4), (2, 2)), a)
    with pytest.raises(ValueError, match="beta=1.0 with a bfloat16 c"):
        nl.ops.gemm(a, nl.ops.to_bf16(nl.zeros((6, 2), (3, 2))),
                    out=nl.ops.to_bf16(nl.zeros((4, 2), (2, 2))), beta=1.0)
    with pytest.raises(TypeError, match="to_bf16: x must be float32, got bfloat16"):
        nl.ops.to_bf16(a)
    with pytest.raises(TypeError, match="to_f32: x must be bfloat16, got float32"):
        nl.ops.to_f32(nl.zeros((4, 6)))
    with pytest.raises(ValueError, match="to_bf16: out: shapes/tiles differ"):
        nl.ops.to_bf16(nl.zeros((4, 6), (2, 3)), out=nl.ops.to_bf16(nl.zeros((4, 6))))
    with pytest.raises(TypeError, match="fill: y is bfloat16.*ops.to_bf16"):
        nl.ops.fill(a, 1.0)
    with pytest.raises(TypeError, match="copy: x is bfloat16.*ops.to_f32"):
        nl.ops.copy(a)
    with pytest.raises(TypeError, match="gelu: x must be float32, got bfloat16"):
        nl.ops.gelu(a)


AVX2_SCRIPT = """
import ml_dtypes, numpy as np, nntile_lab as nl
rng = np.random.default_rng(3)
a = rng.standard_normal((2, 70, 50)).astype(ml_dtypes.bfloat16)
b = rng.standard_normal((2, 40, 70)).astype(ml_dtypes.bfloat16)
c0 = rng.standard_normal((2, 50, 40)).astype(np.float32)
with nl.Runtime(ncpu=2):
    got = nl.ops.gemm(nl.from_numpy(a, (1, 30, 20)), nl.from_numpy(b, (1, 16, 30)),
                      trans_a=True, trans_b=True, alpha=0.5, beta=-1.0,
                      out=nl.from_numpy(c0, (1, 20, 16)), batch_ndim=1).to_numpy()
opa = a.astype(np.float64).transpose(0, 2, 1)
opb = b.astype(np.float64).transpose(0, 2, 1)
want = 0.5 * np.matmul(opa, opb) - c0
mag = 0.5 * np.matmul(abs(opa), abs(opb)) + abs(c0)
print(float((abs(got - want) / (mag * 2.0**-24)).max()))   # ulps of the magnitude
"""


def test_gemm_bf16_without_avx512_bf16_falls_back_to_sgemm():
    """ONEDNN_MAX_CPU_ISA=AVX2 is a CPU without bf16 matmul in oneDNN 2.6 (no primitive):
    the kernel widens A and B and runs sgemm, transposed-transposed and batched included.
    ONEDNN_VERBOSE shows which path ran."""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ONEDNN_VERBOSE="1")
    run = subprocess.run([sys.executable, "-c", AVX2_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "matmul" not in run.stdout, "oneDNN ran a matmul under AVX2: the test no longer " \
        "exercises the fallback"
    # γ_k of k = 70 (tests.tolerance.dot_ulps), 3 k tiles, α and β
    assert float(run.stdout.strip().splitlines()[-1]) <= dot_ulps(70) + 3 + 2


@pytest.mark.parametrize("march,reg", [("x86-64-v3", "ymm"), ("x86-64-v4", "zmm")])
def test_conversions_are_vectorised(march, reg):
    """Both conversion loops compile to full-width vector code on AVX2 and AVX-512 (a
    scalar loop would have no ymm/zmm instruction at all). They are formulas of the codelet
    table: the build generated their C kernels into kernels/cpu/formulas.c."""
    assert shutil.which("gcc"), "gcc is missing: scripts/setup.sh installs it"
    assert (ROOT / "kernels" / "cpu" / "formulas.c").exists(), \
        "kernels/cpu/formulas.c is missing: build first (scripts/setup.sh test)"
    asm = subprocess.run(["gcc", "-S", "-O3", "-std=gnu11", f"-march={march}",
                          "-fno-trapping-math", "-fno-math-errno", "-I", str(ROOT / "kernels"),
                          "-I", str(ROOT / "kernels" / "cpu"),
                          str(ROOT / "kernels" / "cpu" / "formulas.c"), "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    for fn in ("nl_f32_to_bf16", "nl_bf16_to_f32"):
        body = re.search(rf"^{fn}:\n(.*?)\.size\s+{fn}", asm, re.M | re.S).group(1)
        assert len(re.findall(rf"%{reg}", body)) >= 8, f"{fn} is not vectorised for {march}"


@given(shape_and_tiles(), seeds())
def test_gelu_bf16_keeps_its_input_and_rounds_its_output(rt, st_, seed):
    """The fused forward: the input's bf16 copy bit for bit as to_bf16 makes it, and GELU
    within one bf16 rounding (2⁻⁸ of the value) plus float32's own GELU error
    (tests/ops/elementwise_ref.py's ulps of its magnitude) of float64's."""
    shape, tiles = st_
    # ±0 and exact ties of the input's rounding included
    x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)
    u = x.reshape(-1).view(np.uint32)
    u[::5] = (u[::5] & 0xFFFF0000) | 0x8000
    x.reshape(-1)[::7] = 0.0
    xk, out = nl.ops.gelu_bf16(nl.from_numpy(x, tiles))
    assert xk.dtype == out.dtype == BF16 and xk.tile_shape == out.tile_shape == tiles
    assert np.array_equal(_bits(xk.to_numpy()), _rne_reference(x.ravel()).reshape(shape))
    want, mag = gelu(x)
    assert_close(out.to_numpy(), want, abs(want) + 12 * (U32 / U_BF16) * mag, ulps=1,
                 unit=U_BF16, what="gelu_bf16")


@given(shape_and_tiles(), st.sampled_from([0.0, 1.0, -0.5]), seeds())
def test_gelu_backward_bf16_reads_bf16_input(rt, st_, beta, seed):
    """dx = dy·gelu'(x) + β·dx from a bf16 x: float32's accuracy against float64 of
    the same bf16 values: the widening is exact, no rounding is added."""
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2).astype(BF16)
    dy = rng.standard_normal(shape).astype(np.float32)
    dx0 = rng.standard_normal(shape).astype(np.float32)
    d, dmag = gelu_derivative(x.astype(np.float32))
    g, gmag = dy * d, abs(dy) * dmag
    tdx = nl.from_numpy(dx0, tiles)
    nl.ops.gelu_backward_bf16(nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles), tdx, beta=beta)
    b32 = np.float32(beta)
    assert_close(tdx.to_numpy(), g + b32 * dx0, gmag + abs(b32 * dx0), ulps=16, what="β")
    new = nl.ops.gelu_backward_bf16(nl.from_numpy(x, tiles), nl.from_numpy(dy, tiles))
    assert new.dtype == np.float32
    assert_close(new.to_numpy(), g, gmag, ulps=16, what="new dx")


def test_gelu_bf16_ops_refuse_wrong_dtypes(rt1):
    x = nl.from_numpy(np.ones((4, 3), np.float32), (2, 3))
    x16 = nl.ops.to_bf16(x)
    with pytest.raises(TypeError, match="gelu_bf16: x must be float32, got bfloat16"):
        nl.ops.gelu_bf16(x16)
    with pytest.raises(TypeError, match="gelu_backward_bf16: x must be bfloat16, got float32"):
        nl.ops.gelu_backward_bf16(x, x)
    with pytest.raises(TypeError, match="gelu_backward_bf16: dy must be float32, got bfloat16"):
        nl.ops.gelu_backward_bf16(x16, x16)
    with pytest.raises(ValueError, match="gelu_backward_bf16: dy: shapes/tiles differ"):
        nl.ops.gelu_backward_bf16(x16, nl.from_numpy(np.ones((4, 3), np.float32), (1, 3)))
