"""GPT-2 trains on OpenCL workers with the CPU run's losses (issue 18): on a mixed CPU +
OpenCL runtime where the scheduler places each task; forced onto the device for every op
that has an OpenCL implementation (``Runtime.on("opencl", fallback="cpu")``), with the
trace showing where each task ran; and the list of codelets a step submits, each of which
must have an OpenCL implementation for a step to run on the device alone."""
import contextlib

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import experiment
from nntile_lab._lib import ffi, lib
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace.recorder import Trace
from tests.conftest import need_opencl

ROWS = [ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]
# a small GPT-2 whose every axis is split into several tiles (so the step uses the
# split forms of its ops: slices, fibers, merges), learning one fixed batch at a high
# rate: its loss falls fast, so an op that is wrong anywhere shows in the losses
SPLIT = dict(n_layer=1, n_head=2, n_embd=64, seq_len=16, batch=2, vocab_size=500,
             embd_tile=32, seq_tile=8, vocab_tile=100, lr=1e-2, warmup=0, steps=6)


def _has_opencl(row: str) -> bool:
    return bool(lib.nl_op_has_opencl(ROWS.index(row)))


class OneBatch:
    """The same batch every step: the model learns it, the loss falls step by step."""

    def __init__(self, vocab: int, batch: int, seq_len: int):
        ids = np.random.default_rng(1).integers(0, vocab, (batch, seq_len + 1))
        self.batch = ids[:, :-1], ids[:, 1:]

    def sample_batch(self, batch, seq_len, rng):
        return self.batch


def _train(nopencl: int, *, forced: bool = False, **fields):
    """The losses of ``steps`` training steps, and the trace's task table."""
    spec = ExperimentSpec(**{"ncpu": 1, "scheduler": "eager", "nopencl": nopencl, **fields})
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with experiment.runtime(spec, profiling=True) as rt:
        model, opt, schedule = experiment.build(spec)
        batches = OneBatch(spec.vocab_size, spec.batch, spec.seq_len)
        where = rt.on("opencl", fallback="cpu") if forced else contextlib.nullcontext()
        with Trace(rt) as trace, where:
            losses = [experiment.train_step(model, opt, batches, np.random.default_rng(0),
                                            batch=spec.batch, seq_len=spec.seq_len,
                                            grad_accum=1, lr=schedule(k), clip_norm=1.0)[0]
                      for k in range(spec.steps)]
    return np.array(losses), trace.tasks


@pytest.fixture(scope="module")
def cpu_run():
    return _train(0, **SPLIT)


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
    need_opencl()
    cpu, none = _losses(0)
    mixed, on_device = _losses(1)
    assert none == 0 and on_device > 0   # the device really took part
    np.testing.assert_allclose(mixed, cpu, rtol=1e-5)


def test_gpt2_forced_onto_opencl_has_the_cpu_losses(cpu_run):
    """Every task whose op has an OpenCL implementation runs on the device (the trace's
    worker says so), the others on the CPU, and the losses are the CPU run's.

    Tolerance: the two runs do the same float32 arithmetic in other orders and with other
    exp/log (CLBlast's GEMM, the device's exp, cross-entropy's float-float sums instead of
    double). Such differences move each loss by a few ulp, as splitting the tiles
    otherwise does on the CPU alone; 1e-6 relative is 8 ulp of a loss between 4 and 8,
    while an op computing anything wrong moves the losses by far more (they fall by
    a third over these steps)."""
    need_opencl()
    cpu, _ = cpu_run
    dev, tasks = _train(1, forced=True, **SPLIT)
    on_device = tasks["worker_name"].str.contains("OpenCL")
    can = tasks["name"].map(_has_opencl)
    misplaced = sorted(set(tasks["name"][on_device != can]))
    assert misplaced == [], f"ran on the wrong kind of worker: {misplaced}"
    ran_there = set(tasks["name"][on_device])
    assert {"embedding", "embedding_backward", "cross_entropy_stats", "cross_entropy_merge",
            "cross_entropy_loss", "cross_entropy_backward", "mask_causal", "permute", "gemm",
            "gelu", "gelu_backward", "adamw", "fill"} <= ran_there, ran_there
    assert cpu[-1] < 0.7 * cpu[0]   # it learns: the comparison means something
    np.testing.assert_allclose(dev, cpu, rtol=1e-6)


def test_every_codelet_of_a_gpt2_step_has_an_opencl_implementation(cpu_run):
    """What a float32 GPT-2 training step submits, with its axes split into tiles and
    with whole tiles (the fused softmax / layer-norm forms): each codelet must have an
    OpenCL implementation, or a step cannot run on the device alone."""
    _, split = cpu_run
    _, whole = _train(0, **{**SPLIT, "embd_tile": None, "seq_tile": None, "vocab_tile": None,
                            "steps": 1})
    submitted = set(split["name"]) | set(whole["name"])
    assert {"gemm", "embedding", "cross_entropy_stats", "adamw"} <= submitted
    missing = sorted(r for r in submitted if not _has_opencl(r))
    assert missing == [], (f"a GPT-2 step submits {len(missing)} codelets with no OpenCL "
                           f"implementation: {', '.join(missing)}")
