"""Runtime faults: memory caps that cannot be met fail fast with nl.OutOfMemory (never a
spin), bad ooc_dir settings are clear errors, views of freed tensors or of a stopped
runtime raise (never a segfault), and a user's exception inside ``with Runtime()``
is not replaced by a pending TaskError."""
import time

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.nn import GPT2, GPT2Config

MODEL = GPT2Config(n_layer=2, n_head=2, n_embd=128, vocab_size=50257, n_positions=64,
                   vocab_tile=8192)   # ~53 MiB of parameters in tiles of ≤ 4 MiB


def test_model_over_the_memory_limit_fails_fast():
    t0 = time.monotonic()
    with nl.Runtime(memory_limit_mb=16, ncpu=2) as rt:
        with pytest.raises(nl.OutOfMemory, match=r"more than memory_limit_mb=16 and no disk node "
                                              r"allow: raise memory_limit_mb to at least \d+, "
                                              r"or give ooc_dir="):
            GPT2(MODEL, seed=0)
        # what was built before the error is freed as usual; the runtime still works
        x = nl.from_numpy(np.arange(6, dtype=np.float32), (3,))
        assert np.array_equal(nl.ops.scale(x, 2.0).to_numpy(), 2 * np.arange(6))
        assert rt.tile_bytes > 0
    assert time.monotonic() - t0 < 10


def test_disk_node_too_small_fails_fast(tmp_path):
    with (nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=16, ncpu=2),
          pytest.raises(nl.OutOfMemory, match=r"memory_limit_mb=16 \+ ooc_size_mb=16 \(disk "
                                           r"node in .*\) allow: raise ooc_size_mb")):
        GPT2(MODEL, seed=0)


def test_tile_larger_than_the_limit_is_refused():
    with nl.Runtime(memory_limit_mb=16, ooc_dir="/tmp", ooc_size_mb=1024, ncpu=1):
        with pytest.raises(nl.OutOfMemory, match=r"tiles of 32.0 MiB, more than "
                                              r"memory_limit_mb=16: a task needs its tiles"):
            nl.empty((4096, 2048), (4096, 2048))
        t = nl.empty((4096, 2048), (1024, 2048))   # 8 MiB tiles on disk: fine
        t.free()


def test_task_whose_tiles_together_exceed_the_limit_is_refused(tmp_path):
    """Each 6 MiB tile fits under a 16 MiB cap, but a multiply reads two and writes one
    (18 MiB in RAM at once): StarPU would wait forever even with a disk node. The
    task is refused at submission, naming the op; smaller tiles then work."""
    t0 = time.monotonic()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1536, 1024)).astype(np.float32) for _ in range(2))
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256, ncpu=2):
        x, y = nl.from_numpy(a, a.shape), nl.from_numpy(b, b.shape)
        with pytest.raises(nl.OutOfMemory, match=r"a mul task needs 18.0 MiB of tiles in RAM "
                                              r"at once, more than memory_limit_mb=16.*"
                                              r"smaller tiles"):
            nl.ops.mul(x, y)
        x.free(), y.free()
        x, y = nl.from_numpy(a, (512, 1024)), nl.from_numpy(b, (512, 1024))
        np.testing.assert_array_equal(nl.ops.mul(x, y).to_numpy(), a * b)
    assert time.monotonic() - t0 < 20


def test_accounting_returns_to_zero():
    with nl.Runtime(memory_limit_mb=16, ncpu=1) as rt:
        for _ in range(50):   # 50 × 4 MiB, one at a time, under a 16 MiB cap
            with nl.zeros((1024, 1024), (512, 512)) as z:
                nl.ops.scale(z, 2.0, out=z)
        v = nl.zeros((8, 4)).split_axis(0, 2)   # views hold no tiles of their own
        rt.wait()                                # freed tiles are released after their tasks
        assert rt.tile_bytes == 8 * 4 * 4
        del v


def test_ooc_dir_that_is_a_file_or_cannot_be_created(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match=r"ooc_dir=.*file' is a file, not a directory"):
        nl.Runtime(memory_limit_mb=64, ooc_dir=str(f))
    with pytest.raises(ValueError, match=r"ooc_dir=.*sub' cannot be created \(Not a "
                                         r"directory\)"):
        nl.Runtime(memory_limit_mb=64, ooc_dir=str(f / "sub"))
    assert nl.Runtime.active is None


def test_view_of_freed_base_raises():
    with nl.Runtime(ncpu=2):
        x = nl.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 6), (2, 6))
        v, w = x.split_axis(1, 3), x.merge_axes(0)
        vv = v.merge_axes(1)                 # a view of a view
        assert np.array_equal(vv.to_numpy(), x.to_numpy())
        x.free()
        for view in (v, w, vv):
            with pytest.raises(RuntimeError, match=r"is a view of a tensor that was freed"):
                view.to_numpy()
            with pytest.raises(RuntimeError, match=r"view of a tensor that was freed"):
                nl.ops.scale(view, 2.0)


def test_view_after_runtime_restart_raises():
    rt = nl.Runtime(ncpu=2)
    x = nl.from_numpy(np.ones((4, 6), np.float32), (2, 6))
    v = x.split_axis(1, 3)
    rt.stop()
    with pytest.raises(RuntimeError, match="runtime that was stopped"):
        v.to_numpy()
    rt.start()                               # the same Runtime object, a new StarPU
    try:
        for t in (x, v):
            with pytest.raises(RuntimeError, match="runtime that was stopped and restarted"):
                t.to_numpy()
            with pytest.raises(RuntimeError, match="stopped and restarted"):
                nl.ops.fill(t, 1.0)
        y = nl.from_numpy(np.ones((2, 2), np.float32))
        assert np.array_equal(y.to_numpy(), np.ones((2, 2)))
    finally:
        rt.stop()


def test_user_exception_is_not_replaced_by_a_pending_task_error():
    with pytest.raises(KeyError, match="mine") as err, nl.Runtime(ncpu=2):
        table = nl.zeros((10, 4))
        nl.ops.embedding(nl.from_numpy(np.array([3, 99], np.int64)), table)  # bad id
        raise KeyError("mine")
    assert isinstance(err.value.__context__, nl.TaskError)
    assert any("a task had failed too" in n and "99" in n for n in err.value.__notes__)
    assert nl.Runtime.active is None
    with nl.Runtime(ncpu=2) as rt:   # the error does not leak into the next runtime
        rt.wait()
