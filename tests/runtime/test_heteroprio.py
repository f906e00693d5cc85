"""heteroprio's bucket layout (kernels/runtime/heteroprio.c, issue 18): on CPU + OpenCL
workers every task lands in a bucket that the kinds able to run it serve (StarPU 1.3
aborts otherwise), a task's priority picks its level, and GPT-2 trains with the CPU
run's losses."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab import experiment
from nntile_lab._lib import lib
from nntile_lab.runtime import heteroprio_levels
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import Trace
from nntile_lab.trace.placement import arch_of
from tests.conftest import need_opencl

CPU, OCL = lib.STARPU_CPU, lib.STARPU_OPENCL


def _fresh():
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()


def test_each_class_and_level_has_its_own_bucket_below_starpus_cap():
    levels = heteroprio_levels()
    got = {(kinds, p): lib.nl_heteroprio_bucket_of(kinds, p)
           for kinds in (CPU, CPU | OCL, OCL) for p in range(levels)}
    assert len(set(got.values())) == len(got)            # no two share a bucket
    assert max(got.values()) < 100                        # STARPU_HETEROPRIO_MAX_PRIO
    assert got[(CPU, 0)] == 0   # StarPU's own tasks (priority 0, CPU functions) land here
    # priorities beyond the levels share the top one; negative ones the bottom one
    assert lib.nl_heteroprio_bucket_of(CPU | OCL, 10 * levels) == got[(CPU | OCL, levels - 1)]
    assert lib.nl_heteroprio_bucket_of(OCL, -3) == got[(OCL, 0)]


def test_confined_tasks_run_where_they_were_confined_under_heteroprio():
    need_opencl()
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    with nl.Runtime(scheduler="heteroprio", ncpu=1, nopencl=1) as rt, Trace(rt) as tr:
        x = nl.from_numpy(a, (32, 32))
        with rt.on("opencl"):
            y = nl.ops.gelu(x)                 # the OpenCL-only class
        with rt.on("cpu"):
            z = nl.ops.gemm(y, x)              # the CPU-only class, for an op with both
        w = nl.ops.layer_norm(z, nl.from_numpy(np.ones(64, np.float32), (32,)),
                              nl.from_numpy(np.zeros(64, np.float32), (32,)))[0]
        xb = nl.ops.to_bf16(x)
        v = nl.ops.gemm(xb, xb)                # gemm_bf16: the CPU-only class (oneDNN)
        rt.wait()
        got, got_v = w.to_numpy(), v.to_numpy()
    t = tr.tasks.assign(arch=[arch_of(n) for n in tr.tasks["worker_name"]])
    assert set(t[t["name"] == "gelu"]["arch"]) == {"opencl"}
    assert set(t[t["name"] == "gemm"]["arch"]) == {"cpu"}
    assert set(t[t["name"] == "gemm_bf16"]["arch"]) == {"cpu"}   # CPU only
    a64 = a.astype(np.float64)
    g = 0.5 * a64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (a64 + 0.044715 * a64**3)))
    zz = g @ a64
    ref = (zz - zz.mean(-1, keepdims=True)) / np.sqrt(zz.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    ab = a.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(got_v, ab @ ab, rtol=1e-4, atol=1e-3)


@pytest.fixture(scope="module")
def mixed():
    need_opencl()
    with nl.Runtime(scheduler="heteroprio", ncpu=1, nopencl=1) as rt:
        yield rt


@settings(max_examples=8)
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40), data=st.data(),
       priority=st.integers(-2, 80), kind=st.sampled_from(["any", "cpu", "opencl"]))
def test_any_shape_tiling_priority_and_confinement_computes_the_cpu_result(
        mixed, m, k, n, data, priority, kind):
    """Every (class, level) bucket a task can land in is served: nothing aborts or hangs,
    and gelu(x @ w) normalised over rows is NumPy's."""
    tiles = [data.draw(st.integers(1, d)) for d in (m, k, n)]
    rng = np.random.default_rng(m * 1681 + k * 41 + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    with mixed.scope(priority=priority):
        with mixed.on(kind):
            z = nl.ops.gelu(nl.ops.gemm(nl.from_numpy(x, tiles[:2]),
                                        nl.from_numpy(w, tiles[1:])))
        y = nl.ops.layer_norm(z, nl.from_numpy(np.ones(n, np.float32), (tiles[2],)),
                              nl.from_numpy(np.zeros(n, np.float32), (tiles[2],)))[0]
        got = y.to_numpy()
    h = x.astype(np.float64) @ w
    g = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    ref = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)


def test_heteroprio_runs_the_higher_priority_first():
    """One CPU worker busy with a long GEMM; independent tasks submitted meanwhile in
    rising priority run in falling priority (each priority is its own bucket)."""
    _fresh()
    rng = np.random.default_rng(3)
    with nl.Runtime(scheduler="heteroprio", ncpu=1) as rt:
        assert rt.priorities   # on by default now that heteroprio maps them
        a = nl.from_numpy(rng.standard_normal((768, 768)).astype(np.float32))
        xs = [nl.from_numpy(rng.standard_normal(64).astype(np.float32)) for _ in range(8)]
        rt.wait()
        with Trace(rt) as tr:
            nl.ops.gemm(nl.ops.gemm(a, a), a)          # ~10 ms on the only worker
            for p, x in enumerate(xs):
                with rt.scope(priority=p):
                    nl.ops.scale(x, 2.0)
    t = tr.tasks[tr.tasks["name"] == "scale"].sort_values("start_us")
    # heteroprio prefetches up to two tasks when the worker asks: allow one swap
    order = list(t["priority"])
    assert order[0] == 7 and order[-1] == 0, order
    assert sum(a < b for a, b in zip(order, order[1:])) <= 1, order


def test_gpt2_under_heteroprio_on_cpu_and_opencl_has_the_cpu_losses():
    need_opencl()

    def losses(scheduler, nopencl):
        spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, seq_len=16, batch=2, steps=3,
                              ncpu=1, scheduler=scheduler, nopencl=nopencl)
        _fresh()
        with experiment.runtime(spec, profiling=True) as rt, Trace(rt) as tr:
            model, opt, schedule = experiment.build(spec)
            tokens, rng = experiment.RandomTokens(spec.vocab_size), np.random.default_rng(0)
            out = [experiment.train_step(model, opt, tokens, rng, batch=spec.batch,
                                         seq_len=spec.seq_len, grad_accum=1, lr=schedule(k),
                                         clip_norm=1.0)[0] for k in range(3)]
            rt.wait()
        return out, {arch_of(n) for n in tr.tasks["worker_name"]}

    cpu, _ = losses("eager", 0)
    mixed, archs = losses("heteroprio", 1)
    assert archs == {"cpu", "opencl"}          # both kinds took tasks, none hung
    np.testing.assert_allclose(mixed, cpu, rtol=1e-5)
