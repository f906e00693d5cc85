"""One formula, three back ends: a row of the codelet table with ``formula=`` has its C,
OpenCL and CUDA kernels generated from it and written nowhere by hand; a hand-written
kernel lives in its family's file, named alike in kernels/cpu, kernels/opencl and
kernels/cuda; the generator refuses a formula it cannot compile everywhere, naming the row.

That the generated kernels compute what the hand-written ones did, bit for bit on the CPU:
scripts/kernel_outputs.py (BENCHMARKS.md); each back end against the CPU: the OpenCL tests
(tests/ops/test_opencl.py), the CUDA emulation and build (tests/kernels/)."""
import dataclasses
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
sys.path.insert(0, str(KERNELS))
import formulas  # noqa: E402
from codelets import CODELETS  # noqa: E402

# sources that hold no kernel of a row: shared helpers, the launch glue, generated files
HELPERS = {"cpu/ids.c", "cpu/formulas.c", "opencl/launch.c", "cuda/formulas.cu"}


def _sources(backend, pattern):
    return {p.relative_to(KERNELS).as_posix(): p.read_text()
            for p in sorted((KERNELS / backend).glob(pattern))
            if p.relative_to(KERNELS).as_posix() not in HELPERS}


CPU = _sources("cpu", "*.c")
OCL_KERNELS = _sources("opencl", "*.cl")
OCL_HOST = _sources("opencl", "*.c")
CUDA = _sources("cuda", "*.cu")


def _defined(sources, regex):
    """the files among sources that define what regex matches (at a line's start)"""
    return sorted(path for path, text in sources.items() if re.search(regex, text, re.M))


def _in_family(files, row, backend, ext):
    """files is exactly one file of the row's family: <family>.<ext> or <family>_<part>.<ext>"""
    stem = rf"{backend}/{row.family}(_\w+)?\.{ext}"
    return len(files) == 1 and re.fullmatch(stem, files[0])


def test_a_formula_is_written_once():
    rows = [r for r in CODELETS if r.formula or r.reduce]
    assert len(rows) >= 38
    for row in rows:
        n = row.name
        assert not _defined(CPU, rf"^void nl_{n}\("), n
        assert not _defined(OCL_KERNELS, rf"__kernel void nl_{n}\("), n
        assert not _defined(OCL_HOST, rf"^void nl_ocl_{n}\("), n
        assert not _defined(CUDA, rf"^const char \*nl_cu_{n}\("), n
        assert (row.opencl, row.cuda) == ("axis" if row.reduce else "kernel", "kernel"), n


def test_every_element_wise_row_is_a_formula():
    """The generated element-wise ops and every row of the families whose work is one value
    at a time have formulas: a new one is one row, not three kernels."""
    for row in CODELETS:
        if row.py or row.family in ("elementwise", "bf16", "optim"):
            assert row.formula, row.name


def test_hand_written_kernels_live_in_their_familys_files():
    for row in CODELETS:
        if row.formula or row.reduce:
            continue
        n = row.name
        assert row.family, f"{n} has no family"
        assert _in_family(_defined(CPU, rf"^void nl_{n}\("), row, "cpu", "c"), n
        if row.opencl in ("kernel", "axis"):
            assert _in_family(_defined(OCL_KERNELS, rf"^__kernel void nl_{n}\("), row,
                              "opencl", "cl"), n
        if row.opencl == "host":
            assert _in_family(_defined(OCL_HOST, rf"^void nl_ocl_{n}\("), row, "opencl", "c"), n
        if row.cuda:
            assert _in_family(_defined(CUDA, rf"^const char \*nl_cu_{n}\("), row, "cuda",
                              "cu"), n


def test_family_file_names_are_the_same_in_every_back_end():
    """Every kernel source is a family's (or a part of one), and a family with kernels in
    several back ends has the same file name in each."""
    families = {r.family for r in CODELETS}
    for sources in (CPU, OCL_KERNELS, OCL_HOST, CUDA):
        for path in sources:
            stem = path.split("/")[1].rsplit(".", 1)[0]
            assert stem in families or stem.split("_")[0] in families, path
    for fam in families:
        rows = [r for r in CODELETS if r.family == fam and not (r.formula or r.reduce)]
        stems = {
            "cpu": {p for p in CPU if re.fullmatch(rf"cpu/{fam}(_\w+)?\.c", p)},
            "opencl": {p for p in (*OCL_KERNELS, *OCL_HOST)
                       if re.fullmatch(rf"opencl/{fam}(_\w+)?\.(cl|c)", p)},
            "cuda": {p for p in CUDA if re.fullmatch(rf"cuda/{fam}(_\w+)?\.cu", p)}}
        assert bool(stems["cpu"]) == bool(rows), fam
        assert bool(stems["opencl"]) == any(r.opencl for r in rows), fam
        assert bool(stems["cuda"]) == any(r.cuda for r in rows), fam


def _row(base="relu_backward", **change):
    good = next(r for r in CODELETS if r.name == base)
    return dataclasses.replace(good, name="bad_op", **change)


BAD = [
    (dict(formula="dx = overwrite ? dy : dy + bta * dx"), r"bta in .* is not a buffer, argument"),
    (dict(formula="float d = overwrite ? dy : dx; x = d"), r"x is read-only \(R\) but assigned"),
    (dict(buffers="R x, R dy, W dx", overwrite="", formula="float d = dy"),
     r"output dx \(W\) is never assigned"),
    (dict(formula="dx = dy + beta * dx"), r"use `overwrite`"),
    (dict(overwrite="", formula="dx = overwrite ? dy : dx"), r"`overwrite` needs the row's"),
    (dict(formula="float beta = 1.0f; dx = overwrite ? dy : beta * dx"),
     r"local beta is declared twice or hides"),
    (dict(args="i64 count, f32 beta"), r"arguments start with 'i64 n'"),
    (dict(doc=""), r"give its formula in words as doc="),
    (dict(args="i64 m, i64 k, i64 n, f32 beta", per_slice="float v = x"),
     r"per_slice 'float v = x' reads x at no index: there it reads buffers by e, mn"),
    (dict(args="i64 m, i64 k, i64 n, f32 beta", per_fiber="float v = dy[e]"),
     r"e in per_fiber 'float v = dy\[e\]' is not a buffer, argument, local, index \(j\)"),
    (dict(per_slice="float v = 1.0f"), r"per_slice= has no place in a row of this kind"),
    (dict(base="sumsq_slice", store="s[e] = acc * alpha + (overwrite ? 0 : beta * s)"),
     r"reads s at no index: there it reads buffers by e, mn"),
    (dict(base="sumsq_slice", accumulate="acc = x"),
     r"accumulate 'acc = x': a local, or a sum \+= a term"),
    (dict(base="sumsq_slice", store="s[e] = overwrite ? acc : acc + s[e]; float t = 0"),
     r"its locals come before its stores"),
    (dict(base="sumsq_slice", store="s[e] = overwrite ? acc : acc + x[j]"),
     r"j in store .* is not a buffer, argument, local, index \(e, mn\)"),
    (dict(base="sum_fiber", formula="x = f[j]"), r"formula= has no place in a row of this kind"),
    (dict(base="sumsq_slice", sums=""), r"a reduction needs sums=, accumulate= and store="),
    (dict(base="sumsq_slice", reduce="axis"), r"reduce='axis': a reduction is 'slice'"),
]


@pytest.mark.parametrize("change,message", BAD)
def test_the_generator_refuses_a_bad_formula_naming_the_row(change, message):
    with pytest.raises(formulas.TableError, match=rf"^codelet bad_op \(formula\): .*{message}"):
        formulas.c_file([_row(**change)])


def test_a_reduction_walks_the_tile_as_the_c_kernels_do():
    """Sums along the axis: per-lane partial sums folded across lanes (kernels/cpu/axis.h), one
    work-group column per slice entry on OpenCL, a block's lanes per slice entry on CUDA
    (kernels/cuda/common.cuh), chunks over blocks finished by a second kernel where the row
    writes nothing but its slices; a row that writes the tile after its sums (a formula
    after the store) never chunked."""
    k = formulas.Kernel(next(r for r in CODELETS if r.name == "layer_norm_invstd"))
    c = k.c_source()
    assert "NL_FOR_GROUPS(m, k, n, layer_norm_invstd_group, m, k, n," in c
    assert "mu_q[nl_q] = mean[e];" in c and "acc_q[nl_q] += d * d;" in c
    assert "nl_fold_sum(G, lanes, acc_q);" in c
    assert "s[e] = (float)(finish ? 1 / sqrt(v_q[nl_q] + eps) : v_q[nl_q]);" in c
    ocl = k.ocl_source()
    assert "acc = nl_sum_y(nl_red, nl_p, acc);" in ocl
    assert "if (nl_p.on && nl_p.ly == 0) {\n        s[e] = " in ocl
    cu = k.cuda_source()
    assert "nl_cu_geometry(m * n, k, n == 1, 1, &nl_ws);" in cu
    assert "acc += d * d;" in cu and "nl_cu_fold<NL_CU_SUM>(nl_red, 1, G, nl_q, nl_r);" in cu
    assert "nl_ws[(0 * G.split + nl_s) * G.entries + e] = acc;" in cu
    assert "NL_CU_LAUNCH(layer_norm_invstd_finish, G.entries, stream," in cu
    def cuda(name):
        return formulas.Kernel(next(r for r in CODELETS if r.name == name)).cuda_source()
    tile = cuda("softmax_backward_tile")
    assert "nl_cu_geometry(m * n, k, n == 1, 2, NULL);" in tile and "_finish" not in tile
    fiber = cuda("sum_fiber")
    assert "nl_cu_geometry(k, m * n, n > 1, 1, &nl_ws);" in fiber


def test_a_formula_reads_its_buffers_at_the_index_of_its_space():
    relu_bwd = formulas.Kernel(_row())
    c = relu_bwd.c_source()
    assert "float d = x[i] > 0.0f ? dy[i] : 0.0f;" in c
    # overwrite: the C loop compiled with it constant, once each way
    assert "relu_backward_body" not in c and "bad_op_body(n, beta, x, dy, dx, 1);" in c
    ocl = relu_bwd.ocl_source()
    assert "__kernel void nl_bad_op(long n, float beta, __global const float *x," in ocl
    assert "const int overwrite = beta == 0;" in ocl
    sm = formulas.Kernel(next(r for r in CODELETS if r.name == "softmax_apply"))
    c = sm.c_source()
    # the axis last (n == 1): the slice's values once per fiber, then along it
    assert re.search(r"const int64_t e = i;\n\s+float mv = mx\[e\], r = 1.0f / s\[e\];\n"
                     r"\s+for \(int64_t j = 0; j < k; j\+\+\)", c)
    assert "y[id] = nl_exp(x[id] - mv) * r;" in c
    cu = sm.cuda_source()
    assert "NL_CU_FOR(id, m * k * n)" in cu and "const int64_t e = id / (k * n) * n + id % n;" in cu
