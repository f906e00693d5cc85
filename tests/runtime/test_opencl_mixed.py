"""Mixed CPU + OpenCL runtimes (issue 18): the scheduler places each task on either
kind (ops without an OpenCL implementation only on the CPU) and the results are the
CPU's, under the policies that model unlike workers and heteroprio (its buckets:
tests/runtime/test_heteroprio.py). The per-op comparisons are
tests/ops/test_opencl.py."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab._lib import ffi, lib
from nntile_lab.runtime import opencl_devices
from nntile_lab.trace.recorder import Trace
from tests.conftest import need_opencl
from tests.tolerance import rel_err


def _layer(x, w, gamma, beta):
    """y = gelu(layer_norm(x) @ w) + x: gemm and GELU have OpenCL, layer norm has not"""
    h = nl.ops.layer_norm(x, gamma, beta)[0]
    y = nl.ops.gelu(nl.ops.gemm(h, w))
    nl.ops.add(x, y)
    return y


def _reference(x, w, gamma, beta):
    x64 = x.astype(np.float64)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    h = (x64 - mu) / np.sqrt(var + 1e-5) * gamma + beta
    z = h @ w
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3))) + x64


@pytest.mark.parametrize("scheduler", ["dmda", "dmdas", "heteroprio", "eager", "lws"])
def test_a_mixed_runtime_computes_what_the_cpu_does(scheduler):
    rng = np.random.default_rng(1810)
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((96, 96)).astype(np.float32) / 10
    gamma = rng.standard_normal(96).astype(np.float32)
    beta = rng.standard_normal(96).astype(np.float32)
    with nl.Runtime(scheduler=scheduler, ncpu=1, nopencl=1) as rt:
        assert rt.where == "any" and rt.nworkers == 2
        for _ in range(3):   # the dm* policies calibrate their models over the first runs
            y = _layer(nl.from_numpy(x, (16, 48)), nl.from_numpy(w, (48, 48)),
                       nl.from_numpy(gamma, (48,)), nl.from_numpy(beta, (48,)))
            rt.wait()
            assert rel_err(y.to_numpy(), _reference(x, w, gamma, beta)) <= 1e-5



def test_on_opencl_with_a_cpu_fallback_puts_each_op_where_the_table_says():
    """``on("opencl", fallback="cpu")``: an op with an OpenCL implementation runs on the
    device, one without on the CPU (none is refused), with the CPU's results."""
    rng = np.random.default_rng(1811)
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    x = rng.standard_normal((32, 48)).astype(np.float32)
    w = rng.standard_normal((48, 48)).astype(np.float32) / 10
    gamma = rng.standard_normal(48).astype(np.float32)
    beta = rng.standard_normal(48).astype(np.float32)
    rows = [ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]
    with nl.Runtime(scheduler="dmda", ncpu=1, nopencl=1) as rt:
        with Trace(rt) as trace, rt.on("opencl", fallback="cpu"):
            assert (rt.where, rt.fallback) == ("opencl", "cpu")
            with rt.on("cpu"):   # a nested block has its own fallback (none)
                assert rt.fallback is None
            assert rt.fallback == "cpu"
            y = _layer(nl.from_numpy(x, (16, 48)), nl.from_numpy(w, (48, 48)),
                       nl.from_numpy(gamma, (48,)), nl.from_numpy(beta, (48,)))
        assert (rt.where, rt.fallback) == ("any", None)
        assert rel_err(y.to_numpy(), _reference(x, w, gamma, beta)) <= 1e-5
        tasks = trace.tasks
        can = tasks["name"].map(lambda r: bool(lib.nl_op_has_opencl(rows.index(r))))
        assert (tasks["worker_name"].str.contains("OpenCL") == can).all(), tasks
        assert {"gemm", "gelu"} <= set(tasks["name"][can])
        for kind, fallback, why in [("opencl", "gpu", r"fallback is None or one of any, cpu"),
                                    ("opencl", "opencl", "a different fallback"),
                                    ("any", "cpu", "other than 'any'")]:
            with pytest.raises(ValueError, match=why), rt.on(kind, fallback=fallback):
                pass
            assert (rt.where, rt.fallback) == ("any", None)


def test_a_policy_that_never_uses_the_device_is_refused_with_opencl_workers():
    """modular-gemm hands tasks to CPU and CUDA workers only: a GEMM placed on the OpenCL
    device (on("opencl", fallback="cpu")) waited forever. Refused before StarPU starts,
    by the runtime and by the spec (a usage error on the command line)."""
    from nntile_lab.spec import ExperimentSpec
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with pytest.raises(ValueError, match=r"scheduler='modular-gemm' with nopencl=1: StarPU's "
                                         r"modular-gemm schedules onto CPU and CUDA workers "
                                         r"only"):
        nl.Runtime(scheduler="modular-gemm", ncpu=1, nopencl=1)
    assert nl.Runtime.active is None
    with pytest.raises(ValueError, match=r"--scheduler.*--nopencl.*waits forever"):
        ExperimentSpec(scheduler="modular-gemm", nopencl=1)
    with nl.Runtime(scheduler="modular-gemm", ncpu=1) as rt:   # CPU workers: it runs
        a = nl.full((64, 64), 1.0, (32, 32))
        assert float(nl.ops.gemm(a, a).to_numpy()[0, 0]) == 64.0
        rt.wait()


RSS_CYCLES = """
import gc, numpy as np, nntile_lab as nl
from nntile_lab.rss import rss_bytes
x, seen = np.ones((256, 256), np.float32), []
for i in range(12):
    with nl.Runtime(ncpu=1, nopencl=1) as rt:
        a = nl.from_numpy(x, (128, 128))
        with rt.on("opencl"):
            c = nl.ops.gemm(a, a)     # CLBlast: its programs are cached per context
        c.to_numpy()
    gc.collect()
    seen.append(rss_bytes())
print(seen[3], seen[-1])
"""


@pytest.mark.slow
def test_runtime_starts_and_stops_with_opencl_keep_the_rss_flat():
    """RSS grew ~2–3.5 MiB per Runtime(nopencl=1) start/stop that ran a GEMM on the device
    (132 → 200 MiB over 30): CLBlast kept each context's compiled programs. Over 8 cycles
    after warm-up the growth now stays within the allocator's noise."""
    import subprocess
    import sys
    need_opencl()
    run = subprocess.run([sys.executable, "-c", RSS_CYCLES], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    after_warmup, last = map(int, run.stdout.split())
    assert last - after_warmup <= 8 * (1 << 20), (after_warmup >> 20, last >> 20)
