"""The CUDA kernels' arithmetic without a GPU: kernels/cuda/*.cu compiled for the host (g++
with kernels/cuda/emulate.h standing in for the CUDA runtime; an element-wise launch runs its
threads one after another on a small grid, a reduction's block as real threads meeting at
its barriers) and run against the C kernels on the same inputs, for every row with
cuda="kernel", at the kernel benchmark's cases (nntile_lab.bench.kernels) and, for the axis
family, a layout with n > 1 too; every reduction both ways: one block per result, and cut
in chunks over blocks with the second kernel adding them (kernels/cuda/common.cuh). What
this cannot show: the GPU's expf, cuBLAS (gemm), warp timing (a missing barrier shows as a
race here often, not always). tests/ops/test_cuda.py runs them on a GPU (marker cuda)."""
import os
import sys

import numpy as np
import pytest
from cffi import FFI

from nntile_lab._lib import ffi, lib
from nntile_lab.bench.kernels import Case, _buffers, cases, table
from tests.tolerance import assert_close

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels"))
import cuda_build  # noqa: E402
from codelets import CODELETS  # noqa: E402

# small tiles: a token tile of 24, n_embd 70 (> 64: the CPU's multi-row fibers), 3 heads
DIMS = dict(tokens=24, embd=70, inner=36, vocab_tile=29, vocab=50, batch_tile=2, seq=12,
            heads=3, head_size=5)
KERNEL_ROWS = sorted(r.name for r in CODELETS if r.cuda == "kernel")
FIBERS = {"f", "gamma", "bias", "dgamma", "dbias", "w", "dw"}
SLICES = {"s", "mx", "mean", "inv_std", "inv_rms"}
# rotary positions: (m, k, 2n) heads with (k, n) tables
PAIRED = {"x": 2, "y": 2, "dy": 2, "dx": 2, "cos_t": 0, "sin_t": 0}


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    path = cuda_build.build_emulation(str(tmp_path_factory.mktemp("cuda_emulated")))
    cffi = FFI()
    cffi.cdef("const char *nl_cu_call_op(int op, void **p, const double *a);\n"
              "void nl_emu_set_enough_blocks(long long blocks);")
    return cffi, cffi.dlopen(path)


# how many blocks fill the emulated GPU (kernels/cuda/common.cuh): 1, a reduction is never cut
# in chunks (one block per result); 2⁴⁰, always where its results are few, as on a GPU for a
# tile with few results (its second kernel adds the chunks)
GRIDS = {"blocks": 1, "chunks": 1 << 40}


def _axis_variant(case: Case, m=3, k=5, n=4) -> Case:
    """The case with the axis in the middle of an (m, k, n) tile: n > 1 (the benchmark's
    cases all have n == 1, the axis last)."""
    old_m = case.args["m"]
    sizes = {}
    for name, size in case.sizes.items():
        if case.name.startswith("rope"):
            sizes[name] = PAIRED[name] * m * k * n or k * n
            continue
        sizes[name] = (k if name in FIBERS else m * n if name in SLICES
                       else size // old_m * m * n if name == "sums" else m * k * n)
    return Case(case.name, dict(case.args, m=m, k=k, n=n), sizes, case.init)


def _reduces(name):
    row = next(r for r in CODELETS if r.name == name)
    return bool(row.reduce) or name in HAND_REDUCTIONS


# the hand-written kernels built on common.cuh's reductions
HAND_REDUCTIONS = {"max_slice", "sumsq_all", "softmax_tile", "layer_norm_tile",
                   "cross_entropy_stats", "cross_entropy_stats_bf16", "cross_entropy_loss"}


def _cases():
    rows = {r["name"]: r for r in table()}
    out = []
    for case in cases(DIMS):
        if case.name not in KERNEL_ROWS:
            continue
        variants = [(case, case.name)]
        if {"m", "k", "n"} <= case.args.keys():
            variants.append((_axis_variant(case), f"{case.name}-n4"))
        for c, name in variants:
            for grid in GRIDS if _reduces(case.name) else ["blocks"]:
                out.append(pytest.param(rows[case.name], c, grid,
                                        id=name if grid == "blocks" else f"{name}-{grid}"))
    return out


def _call_both(emu, row, case, bufs, grid="blocks"):
    """The C kernel and the emulated CUDA host function, each on its own copy of bufs."""
    cffi, elib = emu
    elib.nl_emu_set_enough_blocks(GRIDS[grid])
    args = [float(case.args[name]) for _, name in row["args"]]
    cpu = [b.copy() for b in bufs]
    gpu = [b.copy() for b in bufs]
    p = ffi.new("void *[]", [ffi.cast("void *", b.ctypes.data) for b in cpu])
    assert lib.nl_call_op(row["op"], p, ffi.new("double[]", args)) == 0
    q = cffi.new("void *[]", [cffi.cast("void *", b.ctypes.data) for b in gpu])
    err = elib.nl_cu_call_op(row["op"], q, cffi.new("double[]", args))
    return cpu, gpu, (None if err == cffi.NULL else cffi.string(err).decode())


def test_every_kernel_row_is_covered():
    covered = {p.values[1].name for p in _cases()}
    assert covered == set(KERNEL_ROWS)


@pytest.mark.parametrize("row, case, grid", _cases())
def test_emulated_cuda_kernel_matches_the_c_kernel(emu, row, case, grid):
    bufs = _buffers(case, row, np.random.default_rng(7))
    for (mode, dtype, _), b in zip(row["buffers"], bufs):
        if mode != "R" and dtype == "f32" and case.args.get("beta", 1.0) == 0.0:
            b[:] = np.nan   # beta == 0 overwrites an output unread: NaN must not leak
    cpu, gpu, err = _call_both(emu, row, case, bufs, grid)
    assert err is None, err
    for (mode, dtype, name), want, got in zip(row["buffers"], cpu, gpu):
        if mode == "R":
            np.testing.assert_array_equal(got, want, err_msg=f"{case.name}: input {name}")
        elif dtype == "f32":
            # the same formulas: apart only where the exp differs (the CPU's own nl_expf,
            # the host's expf standing in for CUDA's) and by FMA contraction, each a few
            # ulps of the terms; the inputs are the benchmark's standard-normal draws, so
            # the terms are of the output's scale: its RMS stands for them (no row's
            # formula is written twice here: codelets.py has every row)
            finite = np.nan_to_num(want[np.isfinite(want)].astype(np.float64))
            scale = float(np.sqrt((finite ** 2).mean())) if finite.size else 0.0
            assert_close(got, want, abs(want.astype(np.float64)) + scale, ulps=16,
                         what=(case.name, name))
        else:
            np.testing.assert_array_equal(got.view(np.uint16) if dtype == "bf16" else got,
                                          want.view(np.uint16) if dtype == "bf16" else want,
                                          err_msg=f"{case.name}: {name}")


@pytest.mark.parametrize("name", ["embedding", "embedding_backward", "cross_entropy_stats"])
def test_an_id_outside_the_vocabulary_is_the_c_kernels_error(emu, name):
    row = {r["name"]: r for r in table()}[name]
    case = next(c for c in cases(DIMS) if c.name == name)
    args = dict(case.args, vocab=DIMS["vocab_tile"])
    if "check" in args:
        args["check"] = 1
    case = Case(name, args, case.sizes, case.init)
    bufs = _buffers(case, row, np.random.default_rng(3))
    ids = next(b for (_, dtype, _), b in zip(row["buffers"], bufs) if dtype == "i64")
    ids[5], ids[9] = DIMS["vocab_tile"] + 4, -1   # the first bad one is reported
    _, _, err = _call_both(emu, row, case, bufs)
    msg = ffi.new("char[]", 512)
    assert lib.nl_take_error(msg, 512) > 0
    want = ffi.string(msg).decode()
    assert f"{DIMS['vocab_tile'] + 4} is outside the vocabulary of {DIMS['vocab_tile']}" in want
    assert err == want
