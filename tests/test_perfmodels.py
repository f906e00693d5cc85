"""What the performance models learned (``nntile_lab.perfmodels``): live entries per op
and arch agree with the tasks' own traced times; ``per_arch`` compares like with like."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab import perfmodels
from nntile_lab._lib import lib
from nntile_lab.runtime import opencl_devices
from nntile_lab.trace import Trace
from nntile_lab.trace.placement import arch_of


def test_per_arch_compares_the_footprints_both_archs_ran():
    ent = pd.DataFrame([
        # gemm: footprint 1 on both (cpu 10 µs ×3 samples, 20 µs ×1 → 12.5), 2 on cpu only
        ("gemm", "cpu", 0, 1, 100, 10.0, 1.0, 3), ("gemm", "cpu", 0, 1, 100, 20.0, 1.0, 1),
        ("gemm", "opencl", 0, 1, 100, 5.0, 1.0, 2), ("gemm", "cpu", 0, 2, 400, 99.0, 1.0, 5),
        ("softmax_tile", "cpu", 0, 7, 64, 3.0, 0.1, 10)], columns=perfmodels.ENTRY_COLUMNS)
    pa = perfmodels.per_arch(ent).set_index("op")
    assert pa.loc["gemm", "cpu_us"] == pytest.approx(12.5)
    assert pa.loc["gemm", "opencl_us"] == pytest.approx(5.0)
    assert pa.loc["gemm", "opencl_over_cpu"] == pytest.approx(0.4)
    assert pa.loc["gemm", "faster"] == "opencl" and pa.loc["gemm", "footprints"] == 1
    assert pa.loc["softmax_tile", "faster"] == "cpu"
    assert np.isnan(pa.loc["softmax_tile", "opencl_us"])


def test_per_arch_without_shared_footprints_or_samples():
    """A short calibration may leave an op's archs on different tile sizes, and a footprint
    with no sample: each arch is then averaged over its own, untimed entries dropped."""
    ent = pd.DataFrame([
        ("gelu", "cpu", 0, 1, 100, 10.0, 1.0, 4), ("gelu", "opencl", 0, 2, 400, 50.0, 1.0, 2),
        ("gelu", "opencl", 0, 1, 100, 0.0, 0.0, 0)], columns=perfmodels.ENTRY_COLUMNS)
    pa = perfmodels.per_arch(ent).set_index("op")
    assert pa.loc["gelu", "footprints"] == 0
    assert (pa.loc["gelu", "cpu_us"], pa.loc["gelu", "opencl_us"]) == (10.0, 50.0)
    assert pa.loc["gelu", "faster"] == "cpu"


def test_live_models_hold_what_each_arch_measured():
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    rng = np.random.default_rng(5)
    # odd tile sizes: a footprint no other test calibrated in this STARPU_HOME; tasks of
    # ~0.5 ms, so that the kernel, not the task's own overhead, is what both clocks see
    m, k, n = 251, 247, 253
    a = rng.standard_normal((2 * m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    # a model-driven policy: under eager or lws StarPU 1.3 records no samples (unless
    # STARPU_CALIBRATE=1); rt.on places the tasks
    with nl.Runtime(scheduler="dmda", ncpu=1, nopencl=1) as rt, Trace(rt) as tr:
        x, y = nl.from_numpy(a, (m, k)), nl.from_numpy(b)
        for kind in ("cpu", "opencl"):
            with rt.on(kind):
                for _ in range(3):
                    nl.ops.gemm(x, y)
        rt.wait()
        ent = perfmodels.entries()
    g = ent[(ent["op"] == "gemm") & (ent["size_bytes"] == 4 * (m * k + k * n + m * n))]
    assert set(g["arch"]) == {"cpu", "opencl"}
    t = tr.tasks.assign(arch=[arch_of(n) for n in tr.tasks["worker_name"]])
    for arch, row in g.set_index("arch").iterrows():
        assert 1 <= row["nsample"] <= 6      # 6 tasks of this footprint on that arch
        traced = t[(t["name"] == "gemm") & (t["arch"] == arch)]["duration_us"].median()
        # the same tasks, timed by StarPU's model and by the trace
        assert traced / 3 <= row["mean_us"] <= traced * 3, (arch, row["mean_us"], traced)


def test_calibrate_refuses_zero_steps():
    from nntile_lab.spec import ExperimentSpec
    with pytest.raises(ValueError, match="steps=0 must be ≥ 1"):
        perfmodels.calibrate(ExperimentSpec(), steps=0)


# a model file as StarPU 1.3 writes it (format 45): an OpenCL and a CPU combination
MODEL_FILE = (Path(__file__).parent / "starpu_model_v45.txt").read_text()


def test_history_reads_the_models_starpu_saved_without_starpu(tmp_path):
    """StarPU 1.3's model files (format 45): one row per entry of a single-device arch, with
    the FLOPs the tasks carried (NaN where none); other hosts' files and broken ones are
    left out."""
    (tmp_path / "nl_gemm.box").write_text(MODEL_FILE)
    (tmp_path / "nl_gemm.other").write_text(MODEL_FILE)
    (tmp_path / "nl_fill.box").write_text(MODEL_FILE[:300])      # cut short
    h = perfmodels.history(tmp_path, hostname="box")
    assert list(h["op"].unique()) == ["gemm"] and len(h) == 3
    cpu = h[h["arch"] == "cpu"].sort_values("size_bytes")
    assert list(cpu["size_bytes"]) == [81920, 327680] and list(cpu["nsample"]) == [5, 569]
    assert cpu["mean_us"].iloc[0] == pytest.approx(17.1296)
    assert cpu["flops"].iloc[0] == 1048576 and cpu["flops"].isna().iloc[1]
    assert cpu["footprint"].iloc[0] == 0x3506941a
    ocl = h[h["arch"] == "opencl"].iloc[0]
    assert (ocl["size_bytes"], ocl["nsample"], ocl["flops"]) == (327680, 237, 8388608)
    assert perfmodels.history(tmp_path / "none", hostname="box").empty
