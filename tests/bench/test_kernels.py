"""``nntile-lab bench kernels``: every codelet covered, the direct calls it times reach the
right kernel with the right arguments, the roofline arithmetic, the JSON it prints. No
timing thresholds: only that the figures are positive and consistent."""
import ast
import importlib.util
import json
import math
import os
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
import scipy_openblas32  # the build's BLAS headers, for gemm.c's assembly

from nntile_lab import cli
from nntile_lab._lib import ffi, lib
from nntile_lab.bench import kernels as K
from nntile_lab.spec import DEFAULTS

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _codelet_names():
    return [c.name for c in _codelets()]


def test_every_codelet_has_a_case():
    names = _codelet_names()
    assert [r["name"] for r in K.table()] == names            # the compiled table is the table
    for config in K.CONFIGS.values():
        assert sorted(c.name for c in K.cases(config)) == sorted(names)


def test_case_buffers_match_the_table():
    rows = {r["name"]: r for r in K.table()}
    for case in K.cases(K.CONFIGS["main"]):
        row = rows[case.name]
        assert set(case.sizes) == {name for _, _, name in row["buffers"]}, case.name
        assert set(case.args) == {name for _, name in row["args"]}, case.name


def _call(name, args, *arrays):
    row = {r["name"]: r for r in K.table()}[name]
    ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in arrays])
    vals = ffi.new("double[]", [float(args[n]) for _, n in row["args"]])
    return lib.nl_call_op(row["op"], ptrs, vals)


def test_direct_call_passes_arguments_and_buffers_in_order():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(100, dtype=np.float32), rng.standard_normal(100, dtype=np.float32)
    want = 2.0 * x.astype(np.float64) - 0.5 * y
    assert _call("axpby", dict(n=100, alpha=2.0, beta=-0.5), x, y) == 0
    np.testing.assert_allclose(y, want, rtol=1e-6)
    a = rng.standard_normal((3, 5, 4), dtype=np.float32)
    s = np.zeros((3, 4), np.float32)
    assert _call("sum_slice", dict(m=3, k=5, n=4, alpha=1.0, beta=0.0), a, s) == 0
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5)
    assert lib.nl_call_op(lib.nl_op_count(), ffi.new("void *[]", 1), ffi.new("double[]", 1)) == -1
    assert lib.nl_time_op(-1, ffi.new("void *[]", 1), ffi.new("double[]", 1), 3) < 0
    assert lib.nl_time_op_cpu(-1, ffi.new("void *[]", 1), ffi.new("double[]", 1), 3,
                              ffi.new("double *")) < 0


def test_cpu_time_is_the_calling_threads():
    """nl_time_op_cpu's CPU seconds are the calling thread's: never above the wall time of
    the same calls, even while another thread of the process computes beside them (a
    process-wide clock would count both: above the wall time when they run in parallel;
    the thread and wall clocks were seen to disagree by 0.2 % in a VM, hence 5 %)."""
    import threading
    n = 1 << 20
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    row = {r["name"]: r for r in K.table()}["axpby"]
    ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in (x, y)])
    args = ffi.new("double[]", [float(dict(n=n, alpha=1.0, beta=1.0)[name])
                                for _, name in row["args"]])              # y = x + y
    cpu = ffi.new("double *", -1.0)
    done = threading.Event()

    def spin():                          # pure Python: runs while the C call has no GIL
        while not done.is_set():
            sum(range(1000))
    other = threading.Thread(target=spin, daemon=True)
    other.start()
    try:
        wall = lib.nl_time_op_cpu(row["op"], ptrs, args, 200, cpu)
    finally:
        done.set()
        other.join()
    assert 0 < cpu[0] <= wall * 1.05          # a process-wide clock: up to twice the wall
    assert np.all(y == 200)                                    # the 200 calls ran


def test_exp_roof_kernel_computes_exp():
    x = np.linspace(-100, 80, 4096, dtype=np.float32)
    y = np.empty_like(x)
    assert lib.nl_time_vexp(x.size, ffi.cast("float *", x.ctypes.data),
                            ffi.cast("float *", y.ctypes.data), 1) >= 0
    want = np.exp(x.astype(np.float64))
    ok = x > -87.3
    np.testing.assert_allclose(y[ok], want[ok], rtol=3e-7)
    assert np.all(y[x < -87.34] == 0)


def test_roof_time_takes_the_binding_limit():
    roofs = {"gbs": 10.0, "gflops": 100.0, "gexps": 2.0}
    assert K.roof_time(1e9, 1e9, 0, roofs) == (pytest.approx(0.1), "memory")
    assert K.roof_time(1e6, 1e11, 0, roofs) == (pytest.approx(1.0), "compute")
    assert K.roof_time(1e6, 1e6, 4e9, roofs) == (pytest.approx(2.0), "exp")


def test_run_json_is_consistent(capsys):
    only = ["copy", "gelu", "sum_slice", "cross_entropy_loss"]
    assert cli.main(["bench", "kernels", "--only", ",".join(only), "--repeats", "1",
                     "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert {"config", "dims", "machine", "roofs", "kernels", "below_target", "build_isa",
            "cflags", "variant"} <= res.keys()
    # which build of the kernels ran, and the flags it was built with (the set-up's)
    from nntile_lab import _lib, cpu_variant
    assert res["variant"] == _lib.VARIANT
    flags = os.environ.get("NNTILE_LAB_CFLAGS") or cpu_variant.X86_64[_lib.VARIANT][0]
    assert res["cflags"] == flags
    assert [k["name"] for k in res["kernels"]] == [n for n in _codelet_names() if n in only]
    assert all(v > 0 for v in res["roofs"].values())
    for k in res["kernels"]:
        assert k["time_us_min"] <= k["time_us"] <= k["time_us_max"] and k["time_us"] > 0
        # CPU time: the thread's share of the same calls, never more than their wall time
        # (but for the two clocks' few-per-mille disagreement seen in a VM)
        assert 0 < k["on_cpu"] <= 1.05 and k["time_us_cpu"] > 0
        assert k["gflops_cpu"] == pytest.approx(k["flops"] / k["time_us_cpu"] / 1e3)
        assert k["bytes"] > 0 and k["roof_gbs"] > 0 and k["elements"] > 0
        assert k["gbs"] == pytest.approx(k["bytes"] / k["time_us"] / 1e3)
        assert k["ns_per_element"] == pytest.approx(k["time_us"] * 1e3 / k["elements"])
        roofs = {"gbs": k["roof_gbs"], "gflops": res["roofs"]["sgemm_gflops_1thread"],
                 "gexps": res["roofs"]["exp_gexps_8lanes"]}
        roof, bound = K.roof_time(k["bytes"], k["flops"], k["exps"], roofs)
        assert (k["roof_us"], k["bound"]) == (pytest.approx(roof * 1e6), bound)
        assert k["fraction"] == pytest.approx(k["roof_us"] / k["time_us"])
        assert k["below_target"] == (k["fraction"] < K.TARGET)
        assert (k["name"] in res["below_target"]) == k["below_target"]
    gelu = next(k for k in res["kernels"] if k["name"] == "gelu")
    assert gelu["exps"] == gelu["elements"] == 512 * 512                # main job's MLP tile
    assert math.isfinite(gelu["gflops"]) and gelu["gflops"] > 0


def test_report_flags_kernels_below_half():
    res = K.run(repeats=1, only=["fill", "copy"])
    res["kernels"][0].update(fraction=0.3, below_target=True)
    res["kernels"][1].update(fraction=0.9, below_target=False)   # not as timed on a busy machine
    res["below_target"] = ["fill"]
    lines = K.report(res).splitlines()
    assert [ln for ln in lines if ln.startswith("fill ")][0].endswith("<-- below 50 %")
    assert not [ln for ln in lines if ln.startswith("copy ")][0].endswith("below 50 %")
    assert lines[-1].endswith(": fill")


# The hot kernels must vectorise with AVX2 alone (issue 11: on Zen 2 they ran scalar), and
# use AVX-512's 16 lanes where it is there: those that sit on exp, AdamW, and every kernel
# of the element-wise family (its rows in the table: a new one is checked by itself).
HOT = ["nl_cross_entropy_stats", "nl_cross_entropy_backward", "nl_adamw", "nl_softmax_tile",
       "nl_softmax_sumexp", "nl_softmax_apply", "nl_gelu_bf16", "nl_gelu_backward_bf16",
       "nl_cross_entropy_stats_bf16", "nl_cross_entropy_backward_bf16"]
PACKED = r"^\s+v(fn?madd|fn?msub|mul|add|sub|max|min|cmp|blendv|and|andn|or|div|sqrt)\w*ps\s.*%"


def _hot_kernels():
    """{kernel: the fewest full-width packed float operations it must have}: the listed
    ones a whole vectorised body (8), the element-wise family's any (a scalar loop has
    none: it works on single floats, ``ss``)."""
    return {**{f"nl_{c.name}": 1 for c in _codelets() if c.py}, **dict.fromkeys(HOT, 8)}


def _codelets():
    spec = importlib.util.spec_from_file_location("codelets", ROOT / "kernels" / "codelets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CODELETS


def _asm_bodies(march):
    """Every kernel's assembly, compiled as the build compiles it but for ``march``."""
    # both exist wherever the extension was built (scripts/setup.sh): missing means a broken
    # set-up, which must fail here rather than skip the check
    assert shutil.which("gcc"), "gcc is missing: scripts/setup.sh installs it"
    assert (ROOT / "kernels" / "cpu" / "prototypes.h").exists(), \
        "kernels/cpu/prototypes.h is missing: build first (scripts/setup.sh test)"
    text = (ROOT / "kernels" / "build.py").read_text()
    flags = ast.literal_eval(re.search(r"^VALUE_SAFE = (\[.*\])$", text, re.M).group(1))
    includes = ["-I", str(ROOT / "kernels"), "-I", str(ROOT / "kernels" / "cpu"),
                "-I", scipy_openblas32.get_include_dir(),
                *subprocess.run(["pkg-config", "--cflags", "starpu-1.3"], check=True,
                                capture_output=True, text=True).stdout.split()]
    bodies = {}
    for source in sorted((ROOT / "kernels" / "cpu").glob("*.c")):
        asm = subprocess.run(["gcc", "-S", "-O3", "-std=gnu11", f"-march={march}", *flags,
                              *includes, str(source), "-o", "-"],
                             check=True, capture_output=True, text=True).stdout
        bodies.update(re.findall(r"^(nl_\w+):\n(.*?)\.size\s+\1", asm, re.M | re.S))
    return bodies


@pytest.mark.parametrize("march,reg,lanes", [("x86-64-v3", "ymm", 8), ("x86-64-v4", "zmm", 16)])
def test_hot_kernels_use_full_width_float_vectors(march, reg, lanes):
    bodies = _asm_bodies(march)
    for fn, least in _hot_kernels().items():
        assert fn in bodies, f"{fn} is not defined in kernels/cpu/*.c"
        packed = re.findall(PACKED + reg, bodies[fn], re.M)
        assert len(packed) >= least, f"{fn} has no {lanes}-lane float code with -march={march}"


def test_tile_sizes_are_the_specs():
    """The main job's tiles come from the spec's defaults: a change there moves the cases."""
    d = DEFAULTS
    assert K.CONFIGS["main"] == K.tile_dims(d)
    main = K.CONFIGS["main"]
    assert main["tokens"] == d.batch_tile * d.seq_len and main["embd"] == d.n_embd
    assert main["inner"] == d.inner_tile and main["vocab_tile"] == d.vocab_tile
    assert main["heads"] * main["head_size"] == d.head_tile * d.n_embd // d.n_head
    wide = K.tile_dims(d.replace(n_embd=384, n_head=6, inner_tile=768))
    by_name = {c.name: c for c in K.cases(wide)}
    t = wide["tokens"]
    assert by_name["gemm"].args == dict(batch=1, m=t, n=768, k=384, trans_a=0, trans_b=0,
                                        alpha=1.0, beta=0.0)
    assert by_name["gelu"].args == {"n": t * 768}             # an MLP tile ("inner")
    assert by_name["axpby"].sizes == {"x": t * 384, "y": t * 384}   # residual stream ("embd")
