"""The tile-buffer cache (``Runtime(buffer_cache_mb=)``): in memory, a freed tile's
buffer serves the next tile of its size, so a step's temporaries stop faulting fresh
pages in; it never changes a result, keeps under its cap, and is off out of core."""
import mmap
import resource

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab.optim import AdamW

MIB = 1 << 20
# 48 MiB tiles: above glibc's largest mmap threshold (32 MiB), so without the cache
# every such tile is a fresh mmap whose pages fault on first touch
BIG = (3 * 1024, 4096)


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _churn(rt, rounds: int) -> tuple[int, np.ndarray]:
    """Minor page faults over ``rounds`` of: a new 48 MiB temporary, written, read into
    a small result, freed. Also returns the last result."""
    out = nl.empty((BIG[1],))
    before = _minor_faults()
    for k in range(rounds):
        tmp = ops.fill(nl.empty(BIG), float(k))
        ops.sum_slice(tmp, axis=0, out=out)
        tmp.free()
        rt.wait()
    faults = _minor_faults() - before
    return faults, out.to_numpy()


def _fresh_tile_faults() -> int:
    """Minor faults of writing every page of a fresh mapping of one BIG tile."""
    size = BIG[0] * BIG[1] * 4
    with mmap.mmap(-1, size) as m:
        before = _minor_faults()
        for offset in range(0, size, 4096):
            m[offset] = 1
        return _minor_faults() - before


def test_cache_reuses_freed_buffers_and_saves_first_touch():
    with nl.Runtime(ncpu=1, scheduler="eager") as rt:
        assert rt.buffer_cache_mb > 0
        _churn(rt, 1)                                      # the first buffer is new
        cached, got = _churn(rt, 4)
        stats = rt.buffer_cache()
        np.testing.assert_array_equal(got, np.full(BIG[1], 3.0 * BIG[0], np.float32))
    with nl.Runtime(ncpu=1, scheduler="eager", buffer_cache_mb=0) as rt:
        assert rt.buffer_cache() == {"hits": 0, "misses": 0, "kept_bytes": 0}
        _churn(rt, 1)
        uncached, _ = _churn(rt, 4)
        assert rt.buffer_cache()["hits"] == 0
    assert stats["hits"] >= 4 and stats["kept_bytes"] >= BIG[0] * BIG[1] * 4, stats
    # Without the cache a round touches a fresh tile; with it, none. What a fresh tile costs
    # in faults depends on the kernel (transparent huge pages, fault-around: CI measured
    # 33 293 faults for 4 tiles of 12 288 pages), so it is measured here, on a fresh
    # anonymous mapping like glibc's for a tile this size.
    fresh = _fresh_tile_faults()
    assert uncached > 2 * fresh, (uncached, fresh)
    assert cached < 0.5 * fresh + 64, (cached, fresh)


def test_cache_keeps_under_its_cap():
    with nl.Runtime(ncpu=1, scheduler="eager", buffer_cache_mb=40) as rt:  # < one 48 MiB tile
        _churn(rt, 3)
        assert rt.buffer_cache() == {"hits": 0, "misses": 3, "kept_bytes": 0}
        for _ in range(2):   # 16 MiB tiles: two fit under 40 MiB, never a third
            tiles = [ops.fill(nl.empty((4096, 1024)), 1.0) for _ in range(3)]
            rt.wait()
            for t in tiles:
                t.free()
            rt.wait()
            assert rt.buffer_cache()["kept_bytes"] == 32 * MIB
    # stopped: the kept buffers went back, and a new runtime starts from nothing
    with nl.Runtime(ncpu=1, scheduler="eager") as rt:
        assert rt.buffer_cache() == {"hits": 0, "misses": 0, "kept_bytes": 0}


def test_cache_is_off_out_of_core(tmp_path):
    with nl.Runtime(ncpu=1, scheduler="eager", memory_limit_mb=256, ooc_dir=str(tmp_path),
                    buffer_cache_mb=512) as rt:
        assert rt.buffer_cache_mb == 0
        _churn(rt, 2)
        assert rt.buffer_cache() == {"hits": 0, "misses": 0, "kept_bytes": 0}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64"])
def test_bad_cache_size_is_refused(bad):
    with pytest.raises(ValueError, match="buffer_cache_mb"):
        nl.Runtime(buffer_cache_mb=bad)
    assert nl.Runtime.active is None


def _train(buffer_cache_mb):
    cfg = nl.GPT2Config(n_layer=2, n_head=4, n_embd=128, n_positions=32, vocab_size=4096,
                        batch_tile=2, inner_tile=256, head_tile=2, vocab_tile=1024)
    rng = np.random.default_rng(1)
    out = []
    with nl.Runtime(scheduler="lws", ncpu=2, buffer_cache_mb=buffer_cache_mb) as rt:
        model = nl.GPT2(cfg, seed=0)
        opt = AdamW(model, lr=1e-3, weight_decay=0.1)
        for _ in range(3):
            ids = rng.integers(0, cfg.vocab_size, (4, 33))
            out.append(model.forward_backward(ids[:, :-1], ids[:, 1:]))
            out.append(opt.step(clip_norm=1.0))
        params = {n: p.to_numpy() for n, p in model.params.items()}
        hits = rt.buffer_cache()["hits"]
    return out, params, hits


def test_training_is_bit_identical_with_and_without_the_cache():
    ref, ref_params, _ = _train(0)
    got, params, hits = _train(None)
    assert hits > 0                 # the second and third steps reused the first's buffers
    assert got == ref
    for n, p in params.items():
        assert np.array_equal(p, ref_params[n]), n
