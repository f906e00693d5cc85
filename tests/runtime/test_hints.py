"""Memory hints (invalidate, wont_use, prefetch, drop_grads): they change where tiles
live and what goes to disk, never a result — losses, gradient norms and parameters are
bit-identical with and without them, in memory and out of core (one worker, eager) — and
invalidate keeps dead tiles from being written to the disk node."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab.bench.memory import _largest
from nntile_lab.nn.state import init_state_dict, iter_init_chunks
from nntile_lab.optim import AdamW
from nntile_lab.spec import HINTS, ExperimentSpec, parse_hints

# ~3.6 M parameters: 58 MiB of weights, gradients and Adam moments against a 32 MiB cap
CFG = dict(n_layer=2, n_head=4, n_embd=256, n_positions=64, vocab_size=8192, batch_tile=2,
           inner_tile=256, head_tile=2, vocab_tile=1024)


def train(hints, tmp_path=None, steps=3, accum=1, precision="fp32"):
    kw = (dict(memory_limit_mb=32, ooc_dir=str(tmp_path), ooc_size_mb=512)
          if tmp_path else {})
    rng = np.random.default_rng(0)
    out = []
    with nl.Runtime(scheduler="eager", ncpu=1, hints=hints, **kw) as rt:
        model = nl.GPT2(nl.GPT2Config(**CFG), seed=0, precision=precision)
        opt = AdamW(model, lr=1e-3, weight_decay=0.1)
        rt.wait()
        rt.disk_traffic(reset=True)
        for _ in range(steps):
            for micro in range(accum):
                ids = rng.integers(0, CFG["vocab_size"], (4, 65))
                out.append(model.forward_backward(ids[:, :-1], ids[:, 1:],
                                                  accumulate=micro > 0, grad_scale=1 / accum))
            out.append(opt.step(clip_norm=1.0))
        rt.wait()
        traffic = rt.disk_traffic()
        params = {n: p.to_numpy() for n, p in model.params.items()}
    return out, params, traffic


@pytest.mark.slow
@pytest.mark.parametrize("where", ["in_memory", "out_of_core"])
def test_hints_leave_results_bit_identical(where, tmp_path):
    ooc = tmp_path if where == "out_of_core" else None
    ref, ref_params, ref_traffic = train("none", ooc and ooc / "none")
    for hints in ("all", *HINTS):
        got, params, traffic = train(hints, ooc and ooc / hints)
        assert got == ref, hints                      # losses and gradient norms, exactly
        for n, p in params.items():
            assert np.array_equal(p, ref_params[n]), (hints, n)
        if ooc is None:
            assert traffic["bytes_written"] == 0
    if ooc is not None:
        assert ref_traffic["bytes_written"] > 0 and ref_traffic["bytes_read"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "bf16-storage"])
def test_hints_leave_bf16_results_bit_identical_out_of_core(precision, tmp_path):
    """The bf16 modes out of core, with every hint and without: their bf16 logits'
    gradient orders the head's gradient zeroing (a bf16 ``after``)."""
    ref, ref_params, traffic = train("none", tmp_path / "none", steps=2, precision=precision)
    got, params, _ = train("all", tmp_path / "all", steps=2, precision=precision)
    assert got == ref
    for n, p in params.items():
        assert np.array_equal(p, ref_params[n]), n
    assert traffic["bytes_written"] > 0 and traffic["bytes_read"] > 0


@pytest.mark.slow
def test_hints_with_gradient_accumulation(tmp_path):
    ref, _, _ = train("none", tmp_path / "a", steps=2, accum=2)
    got, _, _ = train("all", tmp_path / "b", steps=2, accum=2)
    assert got == ref


def test_hints_lower_disk_traffic_out_of_core(tmp_path):
    _, _, none = train("none", tmp_path / "none")
    _, _, every = train("all", tmp_path / "all")
    assert (every["bytes_written"] + every["bytes_read"]
            < 0.9 * (none["bytes_written"] + none["bytes_read"])), (none, every)


def _evict_round(tmp_path, invalidate: bool) -> dict:
    """Write 24 MiB of tiles under a 16 MiB cap, the last 12 MiB dead (invalidated, or
    not: then they are only overwritten later), and write 12 MiB more: without the
    invalidate the dead tiles are evicted, i.e. written to disk."""
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256, ncpu=1,
                    scheduler="eager", hints="none") as rt:
        live = [ops.fill(nl.empty((1024, 1024), (512, 512)), 2.0) for _ in range(3)]
        dead = [ops.fill(nl.empty((1024, 1024), (512, 512)), 1.0) for _ in range(3)]
        rt.wait()
        rt.disk_traffic(reset=True)
        if invalidate:
            for t in dead:
                t.invalidate()
        more = [ops.fill(nl.empty((1024, 1024), (512, 512)), 3.0) for _ in range(3)]
        for t in (*live, *more):
            ops.add(t, t, 0.5, 0.5)   # read and rewrite in place (R, RW)
        for t in dead:        # the next access after an invalidate is a write
            ops.fill(t, 4.0)
        rt.wait()
        assert all((t.to_numpy() == 2.0).all() for t in live)
        assert all((t.to_numpy() == 4.0).all() for t in dead)
        return rt.disk_traffic()


def test_invalidate_reduces_bytes_written_out_of_core(tmp_path):
    kept = _evict_round(tmp_path / "kept", invalidate=False)
    dropped = _evict_round(tmp_path / "dropped", invalidate=True)
    assert dropped["bytes_written"] < kept["bytes_written"] - (4 << 20), (kept, dropped)


def test_an_invalidated_tensor_is_not_read(rt1):
    t = nl.from_numpy(np.ones((8, 8), np.float32), (4, 4))
    t.invalidate()
    with pytest.raises(RuntimeError, match="invalidated"):
        t.to_numpy()
    t.prefetch()
    t.wont_use()                       # hints on dropped tiles do nothing
    assert (ops.fill(t, 0.5).to_numpy() == 0.5).all()
    u = nl.from_numpy(np.ones((8, 8), np.float32), (4, 4))
    u.invalidate()
    u.copy_from_numpy(np.full((8, 8), 3, np.float32))
    assert (u.to_numpy() == 3).all()
    v = nl.from_numpy(np.arange(64, dtype=np.float32).reshape(8, 8), (4, 4))
    v.wont_use()
    v.prefetch(after=t)
    v.wont_use(after=t)
    assert (v.to_numpy() == np.arange(64).reshape(8, 8)).all()


def test_accumulating_into_dropped_gradients_is_an_error():
    with nl.Runtime(scheduler="eager", ncpu=1, hints="invalidate"):
        model = nl.GPT2(nl.GPT2Config(**(CFG | {"vocab_size": 64, "n_embd": 32,
                                                "vocab_tile": 64, "inner_tile": 64})))
        opt = AdamW(model)
        ids = np.zeros((2, 9), np.int64)
        model.forward_backward(ids[:, :-1], ids[:, 1:])
        opt.step()
        with pytest.raises(RuntimeError, match="accumulate=True after the optimizer dropped"):
            model.forward_backward(ids[:, :-1], ids[:, 1:], accumulate=True)
        with pytest.raises(RuntimeError, match="invalidated"):
            model.grad_state_dict()
        with pytest.raises(RuntimeError, match="gradients were dropped"):
            opt.grad_norm()
        model.forward_backward(ids[:, :-1], ids[:, 1:])   # a new step writes them first
        assert all(np.isfinite(g).all() for g in model.grad_state_dict().values())


def test_hint_sets():
    assert parse_hints("none") == parse_hints("") == parse_hints(None) == frozenset()
    assert parse_hints("all") == frozenset(HINTS)
    assert parse_hints(" invalidate , prefetch") == {"invalidate", "prefetch"}
    with pytest.raises(ValueError, match="unknown hint"):
        ExperimentSpec(hints="invalidate,evict")
    assert ExperimentSpec(hints="none").runtime_kwargs()["hints"] == "none"
    assert parse_hints("auto", out_of_core=False) == frozenset()
    # wont_use is opt-in: StarPU 1.3 holds a hinted tile in RAM until its idle write
    # runs, and runs none while a task waits for memory (docs/out-of-core.md)
    assert parse_hints("auto") == {"invalidate", "drop_grads"}


def test_initialisation_in_bands_gives_the_same_values(monkeypatch, rt1):
    from nntile_lab.nn import state
    cfg = nl.GPT2Config(**(CFG | {"vocab_size": 1000, "vocab_tile": 96, "n_embd": 64,
                                  "embd_tile": 16, "inner_tile": 48}))
    monkeypatch.setattr(state, "INIT_CHUNK_BYTES", 4096)   # many bands per parameter
    whole = init_state_dict(cfg, seed=3)
    parts = {}
    for name, row0, chunk in iter_init_chunks(cfg, seed=3):
        parts.setdefault(name, []).append((row0, chunk))
    for name, value in whole.items():
        assert np.array_equal(np.concatenate([c for _, c in parts[name]]), value), name
        assert [r for r, _ in parts[name]][0] == 0
    assert len(parts["transformer.wte.weight"]) > 3
    model = nl.GPT2(cfg, seed=3)
    for name, value in model.state_dict().items():
        assert np.array_equal(value, whole[name]), name
    t = nl.empty((10, 6), (4, 3))
    t.copy_rows_from_numpy(np.ones((8, 6), np.float32), 0)
    t.copy_rows_from_numpy(np.full((2, 6), 2, np.float32), 8)
    assert (t.to_numpy() == np.r_[np.ones((8, 6)), np.full((2, 6), 2)]).all()
    with pytest.raises(ValueError, match="whole number of tile bands"):
        t.copy_rows_from_numpy(np.ones((3, 6), np.float32), 4)


def test_largest_model_search_is_a_bisection():
    widths = list(range(128, 4097, 64))
    for limit in (100, 128, 700, 2000, 3000, 4096):
        near = max(0, min(len(widths) - 1, (limit - 128) // 64 + 3))   # a planner's guess
        for start, most in ((None, 10), (near, 8), (0, 14)):
            calls = []

            def fits(e, limit=limit, calls=calls):
                calls.append(e)
                return {"e": e} if e <= limit else None
            e, res = _largest(widths, fits, start=start)
            assert e == (max(w for w in widths if w <= limit) if limit >= 128 else None)
            assert res == (None if e is None else {"e": e})
            # bracketing by doubling the parameters, then bisection: not one run a width
            assert len(calls) <= (most if limit > 128 else 12), (limit, start, calls)
