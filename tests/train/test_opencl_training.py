"""GPT-2 trains on a mixed CPU + OpenCL runtime with the CPU run's losses (issue 18):
ops with an OpenCL implementation (GEMM, GELU, AdamW, the element-wise family, the
broadcasts) may run on the device, the rest on the CPU."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import experiment
from nntile_lab._lib import ffi, lib
from nntile_lab.runtime import opencl_devices
from nntile_lab.spec import ExperimentSpec


def _losses(nopencl: int) -> tuple[list[float], int]:
    """Three steps' losses, and the tasks the OpenCL worker ran."""
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, seq_len=16, batch=2, steps=3,
                          ncpu=1, scheduler="eager", nopencl=nopencl)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with experiment.runtime(spec, profiling=True) as rt:
        model, opt, schedule = experiment.build(spec)
        tokens, rng = experiment.RandomTokens(spec.vocab_size), np.random.default_rng(0)
        losses = [experiment.train_step(model, opt, tokens, rng, batch=spec.batch,
                                        seq_len=spec.seq_len, grad_accum=1, lr=schedule(k),
                                        clip_norm=1.0)[0] for k in range(3)]
        rt.wait()
        on_device = 0
        name = ffi.new("char[]", 128)
        stats = ffi.new("struct nl_worker_stats *")
        for w in range(rt.nworkers):
            lib.starpu_worker_get_name(w, name, 128)
            if b"OpenCL" in ffi.string(name) and lib.nl_worker_stats(w, stats) == 0:
                on_device += stats.tasks
    return losses, on_device


def test_gpt2_on_cpu_and_opencl_workers_has_the_cpu_losses():
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device: run scripts/setup.sh and check `clinfo -l`",
                    pytrace=False)
    cpu, none = _losses(0)
    mixed, on_device = _losses(1)
    assert none == 0 and on_device > 0   # the device really took part
    np.testing.assert_allclose(mixed, cpu, rtol=1e-5)
