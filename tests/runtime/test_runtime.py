import os
import resource

import numpy as np
import pytest

import nntile_lab as nl


def test_unknown_scheduler_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown scheduler 'fifo-ish'; valid ones: .*dmda.*lws"):
        nl.Runtime(scheduler="fifo-ish")


@pytest.mark.parametrize("ncpu", [0, -1, 99, 1.5, True])
def test_bad_ncpu(ncpu):
    with pytest.raises(ValueError, match=f"ncpu={ncpu!r}"):
        nl.Runtime(ncpu=ncpu)


def test_bad_memory_settings(tmp_path):
    with pytest.raises(ValueError, match="memory_limit_mb=4"):
        nl.Runtime(memory_limit_mb=4)
    with pytest.raises(ValueError, match="needs memory_limit_mb"):
        nl.Runtime(ooc_dir=str(tmp_path))


def test_restart_and_second_runtime_is_an_error():
    for sched in ("eager", "dmda", "lws", "eager"):
        with nl.Runtime(scheduler=sched, ncpu=1) as rt:
            assert rt.scheduler == sched and rt.nworkers == 1
            with pytest.raises(RuntimeError, match="already running"):
                nl.Runtime()
            x = nl.full((5,), 2.0, (2,))
            assert np.array_equal(x.to_numpy(), np.full(5, 2.0, np.float32))
        assert not rt.alive


def test_settings_beat_environment(monkeypatch):
    monkeypatch.setenv("STARPU_SCHED", "eager")
    monkeypatch.setenv("STARPU_NCPU", "1")
    with nl.Runtime(scheduler="lws", ncpu=2) as rt:
        assert rt.nworkers == 2
    assert os.environ["STARPU_NCPU"] == "1"


def test_tensor_of_stopped_runtime_is_a_clear_error():
    with nl.Runtime() as rt:
        x = nl.zeros((4, 4), (2, 2))
    with pytest.raises(RuntimeError, match="runtime that was stopped"):
        x.to_numpy()
    with pytest.raises(RuntimeError, match="runtime that was stopped"):
        nl.ops.add(x, x)
    with pytest.raises(RuntimeError, match="has stopped"):
        rt.wait()
    with pytest.raises(RuntimeError, match="no nntile_lab runtime is running"):
        nl.zeros((2,))


def test_wait_waits_for_all_tasks():
    with nl.Runtime(ncpu=2) as rt:
        a = nl.from_numpy(np.ones((256, 256), np.float32), (64, 64))
        outs = [nl.ops.gemm(a, a) for _ in range(4)]
        rt.wait()
        assert all(float(o.to_numpy()[0, 0]) == 256.0 for o in outs)


def test_scope_tags_priority_and_phase():
    with nl.Runtime(profiling=True) as rt:
        with rt.scope(layer=3, phase="backward", priority=5):
            nl.zeros((4,), (2,))
        rt.wait()
        with pytest.raises(ValueError, match="unknown phase 'sideways'"), \
                rt.scope(phase="sideways"):
            pass


def test_out_of_core_evicts_to_disk(tmp_path):
    """Tiles beyond a 32 MiB RAM cap live on the disk node and come back intact."""
    rng = np.random.default_rng(3)
    with nl.Runtime(memory_limit_mb=32, ooc_dir=str(tmp_path), ncpu=2) as rt:
        arrays = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(24)]
        tensors = [nl.from_numpy(a, (256, 256)) for a in arrays]  # 24 MiB ...
        doubled = [nl.ops.scale(t, 2.0) for t in tensors]          # ... + 24 MiB > 32 MiB
        rt.wait()
        assert rt.memory_used() <= 32 << 20
        for a, d in zip(arrays, doubled):
            assert np.array_equal(d.to_numpy(), 2 * a)


def test_create_free_cycles_leak_nothing():
    """10 000 create/compute/free cycles: StarPU's allocations return to zero and
    the process does not grow."""
    with nl.Runtime(memory_limit_mb=256, ncpu=2) as rt:
        def cycle():
            with nl.full((64, 64), 1.0, (32, 32)) as x:
                nl.ops.scale(x, 2.0).free()
        for _ in range(500):  # warm-up: allocator caches, perf models
            cycle()
        rt.wait()
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for k in range(10_000):
            cycle()
            if k % 100 == 99:
                # bound the backlog: on a loaded machine submission outruns the workers,
                # and 10 000 queued cycles would hold up to 320 MB without any leak
                rt.wait()
        rt.wait()
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        assert rt.ntensors == 0, "freed tensors are still registered"
        # StarPU keeps freed buffers cached for reuse (a few MiB, more when the
        # machine is loaded), while a leak would hold 10 000 × 32 KiB = 320 MB here
        assert rt.memory_used() < 64 << 20, f"StarPU still holds {rt.memory_used()} bytes"
    assert grown_kib < 20_000, f"RSS grew by {grown_kib} KiB over 10 000 cycles"


def test_workers_asleep_queue_tasks_and_a_wait_inside_wakes_them():
    """Runtime.workers_asleep (a decode step's submission): tasks queue while the workers
    sleep; a wait inside the block wakes them (never a hang) and the results are exact;
    a runtime with a RAM cap (tiles move through the workers) is never paused."""
    from nntile_lab import runtime as runtime_mod
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with nl.Runtime(ncpu=2) as rt:
        t = nl.from_numpy(x, (1, 4))
        with rt.workers_asleep():
            assert runtime_mod._asleep
            y = nl.ops.scale(t, 2.0)
            z = nl.ops.scale(y, 3.0)
            np.testing.assert_array_equal(z.to_numpy(), 6 * x)   # woke them
            assert not runtime_mod._asleep
            w = nl.ops.scale(z, 0.5)
        assert not runtime_mod._asleep
        np.testing.assert_array_equal(w.to_numpy(), 3 * x)
        for a in (t, y, z, w):
            a.free()
    with nl.Runtime(ncpu=1, memory_limit_mb=64) as rt, rt.workers_asleep():
        assert not runtime_mod._asleep
