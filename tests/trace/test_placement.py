"""Where each op ran (``trace.placement``): counts and times per op and kind of worker
on a hand-made task table whose answer is known, and on a real mixed runtime."""
import types

import numpy as np
import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.runtime import opencl_devices
from nntile_lab.trace import Trace
from nntile_lab.trace.cli import write_placement
from nntile_lab.trace.placement import arch_of, counts, figure, report, table


def _trace(rows):
    t = pd.DataFrame(rows, columns=["name", "worker_name", "duration_us", "flops"])
    return types.SimpleNamespace(tasks=t)


KNOWN = _trace([("gemm", "CPU 0", 100.0, 2e6), ("gemm", "CPU 1", 300.0, 2e6),
                ("gemm", "OpenCL 0 (pthread-znver5)", 50.0, 2e6),
                ("gelu", "OpenCL 0 (pthread-znver5)", 10.0, 0.0),
                ("softmax_tile", "CPU 0", 20.0, 0.0)])


def test_arch_of_reads_starpus_worker_names():
    assert arch_of("CPU 3") == "cpu"
    assert arch_of("OpenCL 0 (pthread-skylake-avx512-AMD EPYC 19.4 GiB)") == "opencl"
    assert arch_of("CUDA 1 (NVIDIA A100)") == "cuda"
    assert arch_of("MPI_MS 0") == "other"


def test_counts_and_times_per_op_and_arch():
    c = counts(KNOWN)
    assert list(c.columns) == ["cpu", "opencl"]
    assert c.loc["gemm"].tolist() == [2, 1] and c.loc["gelu"].tolist() == [0, 1]
    assert c.loc["softmax_tile"].tolist() == [1, 0] and c.loc["total"].tolist() == [3, 2]
    t = table(KNOWN).set_index(["op", "arch"])
    assert t.loc[("gemm", "cpu"), "tasks"] == 2
    assert t.loc[("gemm", "cpu"), "mean_us"] == pytest.approx(200.0)
    assert t.loc[("gemm", "opencl"), "gflops"] == pytest.approx(2e6 / 50.0 / 1e3)
    assert ("gelu", "cpu") not in t.index
    text = report(KNOWN)
    assert text.startswith("where each op ran") and "gemm" in text and "opencl" in text
    fig = figure(KNOWN)
    assert len(fig.axes) == 2
    one_kind = _trace([("gemm", "CPU 0", 1.0, 1.0)])
    assert report(one_kind) == "every task ran on cpu workers (1 tasks)"


def test_a_mixed_run_records_where_each_task_ran(tmp_path):
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    a = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    with nl.Runtime(scheduler="eager", ncpu=1, nopencl=1) as rt, Trace(rt) as tr:
        x = nl.from_numpy(a, (32, 32))
        with rt.on("opencl"):
            nl.ops.gelu(x)
        with rt.on("cpu"):
            nl.ops.scale(x, 2.0)
    c = counts(tr)
    assert c.loc["gelu", "opencl"] == 4 and c.loc["gelu"].get("cpu", 0) == 0
    assert c.loc["scale", "cpu"] == 4 and c.loc["scale"].get("opencl", 0) == 0
    tr.save(tmp_path / "saved")                 # a saved trace says the same, no StarPU
    assert counts(Trace.load(tmp_path / "saved")).equals(c)
    write_placement(tr, str(tmp_path))
    got = pd.read_csv(tmp_path / "placement.csv")
    assert set(zip(got["op"], got["arch"])) >= {("gelu", "opencl"), ("scale", "cpu")}
    assert (tmp_path / "placement.png").read_bytes()[:4] == b"\x89PNG"
