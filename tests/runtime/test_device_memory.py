"""The paper's setting in miniature (issue 18 §3, §6): an OpenCL device whose memory is
capped ("the GPU"), RAM as its overflow. A model several times the cap trains with the
CPU run's losses while tiles leave the device and come back; a task that cannot fit
under the cap is one clear error, never StarPU's endless evict-and-retry."""
import contextlib

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import cli, experiment, memory
from nntile_lab.runtime import OutOfMemory
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import Trace, metrics, viz
from tests.conftest import need_opencl
from tests.tolerance import rel_err

MIB = 1 << 20
CAP_MB = 16
# ~77 MiB of tiles at the peak (the planner's figure, checked below): 4.8× the cap; the
# largest task (an optimizer update of 2048 × 256 vocabulary tiles) is 8 MiB
MODEL = dict(n_layer=2, n_head=4, n_embd=256, seq_len=64, batch=4, vocab_size=8192,
             vocab_tile=2048, ncpu=1, hints="none", steps=2)


def _train(scheduler="dmda", nopencl=1, cap_mb=CAP_MB, place=("opencl", "cpu")):
    """(losses, trace) of two steps of MODEL, placed by ``place`` on a runtime with
    ``nopencl`` devices capped at ``cap_mb``."""
    spec = ExperimentSpec(**MODEL, scheduler=scheduler, nopencl=nopencl,
                          opencl_memory_limit_mb=cap_mb if nopencl else None)
    with experiment.runtime(spec, profiling=True) as rt:
        model, opt, schedule = experiment.build(spec)
        tokens, rng = experiment.RandomTokens(spec.vocab_size), np.random.default_rng(0)
        where = rt.on(*place) if nopencl else contextlib.nullcontext()
        with Trace(rt) as tr, where:
            losses = []
            for k in range(spec.steps):
                losses.append(experiment.train_step(
                    model, opt, tokens, rng, batch=spec.batch, seq_len=spec.seq_len,
                    grad_accum=1, lr=schedule(k), clip_norm=1.0)[0])
                tr.mark_step()
    return losses, tr


def _moved(tr, direction):
    t = metrics.transfers_per_bus(tr)
    return int(t.loc[t["direction"] == direction, "bytes"].sum())


@pytest.mark.slow
def test_a_model_five_times_the_device_cap_trains_with_ram_as_overflow(tmp_path):
    need_opencl()
    plan = memory.check(ExperimentSpec(**MODEL, nopencl=1, opencl_memory_limit_mb=CAP_MB))
    assert plan.allocated_bytes >= 4 * CAP_MB * MIB
    assert plan.device.spill_bytes == plan.allocated_bytes - CAP_MB * MIB
    cpu, _ = _train(nopencl=0)
    capped, tr = _train()
    np.testing.assert_allclose(capped, cpu, rtol=1e-5)
    # the device really ran the step, under its cap, and was full
    on_device = tr.tasks["worker_name"].str.startswith("OpenCL")
    assert on_device.sum() > len(tr.tasks) // 2
    nodes = metrics.memory_per_node(tr).set_index("kind")
    assert nodes.loc["device", "capacity_bytes"] == CAP_MB * MIB and nodes.loc["device",
                                                                             "capped"]
    assert 0.75 * CAP_MB * MIB <= nodes.loc["device", "peak_bytes"] <= CAP_MB * MIB
    # tiles left the device for RAM and came back: with the same placement and no cap the
    # device keeps them, and what still moves is what the CPU's ops read and write
    _, free = _train(cap_mb=None)
    into, out_of = _moved(tr, "RAM → device"), _moved(tr, "device → RAM")
    assert into > 1.5 * _moved(free, "RAM → device") and into > 4 * CAP_MB * MIB
    assert out_of > 1.5 * _moved(free, "device → RAM") and out_of > 2 * CAP_MB * MIB
    buses = metrics.transfers_per_bus(tr)
    assert (buses["transfers"] > 0).all() and set(buses["direction"]) == {
        "RAM → device", "device → RAM"}
    # the trace keeps it: saved and loaded, drawn per node against the cap
    tr.save(str(tmp_path))
    back = Trace.load(str(tmp_path))
    assert back.nodes.to_dict("records") == tr.nodes.to_dict("records")
    assert metrics.memory_per_node(back).equals(metrics.memory_per_node(tr))
    fig = viz.nodes(back)
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("OpenCL 0 (device)") for t in titles)
    assert any(line.get_label() == f"cap {CAP_MB} MiB" for ax in fig.axes
               for line in ax.get_lines())


def test_the_scheduler_placing_tasks_on_a_capped_device_gives_the_cpu_losses():
    need_opencl()
    cpu, _ = _train(nopencl=0)
    mixed, tr = _train(scheduler="dmdas", place=("any",))
    np.testing.assert_allclose(mixed, cpu, rtol=1e-5)
    assert tr.tasks["worker_name"].str.startswith("OpenCL").any()
    assert metrics.memory_per_node(tr).set_index("kind").loc["device", "peak_bytes"] \
        <= CAP_MB * MIB


def test_a_task_bigger_than_the_device_cap_is_one_clear_error():
    rng = np.random.default_rng(1830)
    need_opencl()
    a = rng.standard_normal((1024, 2048)).astype(np.float32)   # one 8 MiB tile each
    b = rng.standard_normal((2048, 1024)).astype(np.float32)
    with nl.Runtime(scheduler="dmda", ncpu=1, nopencl=1, opencl_memory_limit_mb=CAP_MB) as rt:
        ta, tb = nl.from_numpy(a, a.shape), nl.from_numpy(b, b.shape)
        for place in (("opencl",), ("any",), ("opencl", "cpu")):   # wherever the device may go
            with pytest.raises(OutOfMemory, match=r"a gemm task needs 20\.0 MiB of tiles on "
                               r"the OpenCL device at once \(its largest tile 8\.0 MiB\), "
                               r"more than 1/2 of opencl_memory_limit_mb=16.*at least 40, "
                               r"use smaller tiles.*rt\.on\('cpu'\)"), rt.on(*place):
                nl.ops.gemm(ta, tb)
        # the runtime goes on: the same product on the CPU, smaller tiles on the device
        with rt.on("cpu"):
            c = nl.ops.gemm(ta, tb)
        with rt.on("opencl"):
            d = nl.ops.gemm(nl.from_numpy(a, (512, 1024)), nl.from_numpy(b, (1024, 512)))
        want = a.astype(np.float64) @ b
        assert rel_err(c.to_numpy(), want) <= 1e-5 and rel_err(d.to_numpy(), want) <= 1e-5


def test_a_device_cap_below_the_largest_task_is_refused_before_any_task(capsys, tmp_path):
    need_opencl()
    spec = ExperimentSpec(**(MODEL | {"vocab_tile": 8192}), nopencl=1,
                          opencl_memory_limit_mb=CAP_MB)   # a 32 MiB optimizer update
    with pytest.raises(memory.MemoryPlanError, match=r"--opencl-memory-limit-mb 16 is below "
                       r"2 × the largest task that may run on the OpenCL device: 32\.0 MiB.*"
                       r"\(optimizer update\).*raise --opencl-memory-limit-mb to at least 64, "
                       r"or use smaller tiles"):
        experiment.runtime(spec)
    assert nl.Runtime.active is None   # no runtime, no task
    rc = cli.main(["train", "--n-layer", "2", "--n-embd", "256", "--vocab-size", "8192",
                      "--seq-len", "64", "--batch", "4", "--nopencl", "1",
                      "--opencl-memory-limit-mb", "16", "--out", str(tmp_path / "run"),
                      "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "--opencl-memory-limit-mb 16 is below" in err, err
    assert not (tmp_path / "run").exists()


def test_a_disk_node_under_a_device_is_refused_not_a_livelock(tmp_path):
    # device → RAM → disk hung StarPU 1.3.10 in the second step (BENCHMARKS.md)
    need_opencl()
    with pytest.raises(ValueError, match=r"ooc_dir=.* with nopencl=1: a disk node under an "
                                         r"OpenCL device's memory .*livelocks"):
        nl.Runtime(ncpu=1, nopencl=1, opencl_memory_limit_mb=16, memory_limit_mb=40,
                   ooc_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"\(--ooc-dir\) with nopencl=1 \(--nopencl\)"):
        ExperimentSpec(**MODEL, nopencl=1, memory_limit_mb=40, ooc_dir=str(tmp_path))
    assert nl.Runtime.active is None
