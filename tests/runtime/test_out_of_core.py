"""Out-of-core training: under a RAM cap that forces eviction to an O_DIRECT disk node,
training, validation, checkpoints and resume give exactly the in-memory results, and
the disk node's counters prove the tiles went to disk and came back."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab.optim import AdamW
from nntile_lab.train.checkpoint import load_checkpoint
from nntile_lab.train.schedule import WarmupCosine
from nntile_lab.train.trainer import train
from tests.jupyter_kernel import REPO
from tests.torch_adapter import tiny_dataset

# ~3.6 M parameters: 58 MiB of weights, gradients and Adam moments against a 32 MiB cap
CFG = dict(n_layer=2, n_head=4, n_embd=256, n_positions=64, vocab_size=8192, batch_tile=2,
           inner_tile=256, head_tile=2, vocab_tile=1024)
CAP_MB = 32
COLS = ["step", "loss", "lr", "grad_norm", "val_loss"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"), vocab=CFG["vocab_size"], n_train=6000)


def run(data, out, steps, ooc_dir=None, resume=None):
    kw = dict(memory_limit_mb=CAP_MB, ooc_dir=str(ooc_dir), ooc_size_mb=512) if ooc_dir else {}
    with nl.Runtime(scheduler="eager", ncpu=1, **kw) as rt:   # one worker: bit-identical
        model = nl.GPT2(nl.GPT2Config(**CFG), seed=0)
        opt = AdamW(model, lr=1e-3, weight_decay=0.1)
        log = train(model, opt, data, steps=steps, batch=4, seq_len=64, out_dir=out,
                    schedule=WarmupCosine(1e-3, 1, 4, 1e-4), eval_every=2, eval_batches=1,
                    checkpoint_every=2, resume=resume, progress=False)
        rt.wait()
        assert rt.memory_used() <= CAP_MB << 20 or not ooc_dir
        return log, rt.disk_traffic()


@pytest.mark.slow
def test_out_of_core_training_equals_in_memory(data, tmp_path):
    ref, none = run(data, tmp_path / "ram", steps=4)
    assert none["bytes_written"] == 0
    ooc, traffic = run(data, tmp_path / "ooc", steps=4, ooc_dir=tmp_path / "disk")
    pd.testing.assert_frame_equal(ooc[COLS], ref[COLS])          # bit-identical, val included
    assert ooc["val_loss"].notna().sum() == 2
    state_mb = 16 * nl.GPT2Config(**CFG).num_params(with_positions=True) / 2**20
    # every step streams most of the 58 MiB state out and back in
    assert traffic["bytes_written"] > 4 * (state_mb - CAP_MB) * 2**20, traffic
    assert traffic["bytes_read"] > 4 * (state_mb - CAP_MB) * 2**20, traffic
    # checkpoints written out of core hold the in-memory run's arrays
    a, b = load_checkpoint(tmp_path / "ram"), load_checkpoint(tmp_path / "ooc")
    for name, array in a.model_state.items():
        assert np.array_equal(array, b.model_state[name]), name

    # resume out of core from the step-2 checkpoint of an interrupted out-of-core run
    run(data, tmp_path / "part", steps=2, ooc_dir=tmp_path / "disk2")
    resumed, _ = run(data, tmp_path / "part", steps=4, ooc_dir=tmp_path / "disk3",
                     resume=tmp_path / "part")
    pd.testing.assert_frame_equal(resumed[COLS], ref[COLS])


@pytest.mark.slow
@pytest.mark.parametrize("backend", nl.Runtime.OOC_BACKENDS)
def test_tiles_of_any_size_round_trip_through_disk(tmp_path, backend):
    """O_DIRECT needs whole pages: tiles of odd byte sizes go through a bounce buffer."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((301, 577)).astype(np.float32) for _ in range(40)]
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256, ncpu=2,
                    ooc_backend=backend) as rt:
        tensors = [nl.from_numpy(a, (97, 129)) for a in arrays]    # 27 MiB > 16 MiB
        doubled = [nl.ops.scale(t, 2.0) for t in tensors]
        for a, d in zip(arrays, doubled):
            assert np.array_equal(d.to_numpy(), 2 * a)
        traffic = rt.disk_traffic(reset=True)
        assert traffic["bytes_written"] > 20 << 20 and traffic["bytes_read"] > 10 << 20
        assert rt.disk_traffic()["bytes_read"] == 0   # reset


def test_bad_backend():
    with pytest.raises(ValueError, match="ooc_backend='tape'"):
        nl.Runtime(ooc_backend="tape")


def test_in_place_ops_read_their_evicted_input(tmp_path):
    """``out=x`` on an op whose output is W mode: StarPU 1.3 takes a handle given twice
    (R and W) in W mode alone, so out of core the evicted input was not read back and
    the op saw zeros; such tasks now use the op's twin codelet with the output in RW."""
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256, ncpu=1,
                    scheduler="eager") as rt:
        ts = [nl.ops.fill(nl.empty((1024, 1024), (512, 512)), float(k)) for k in range(9)]
        rt.wait()    # 36 MiB under a 16 MiB cap: the first ones are on disk only
        for t in ts:
            nl.ops.scale(t, 2.0, out=t)
            nl.ops.gelu(t, out=t)
        for k, t in enumerate(ts):
            x = np.float32(2 * k)
            want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
            assert np.allclose(t.to_numpy(), want, rtol=1e-5), k
        assert rt.disk_traffic()["bytes_read"] > 0


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_an_output_overwritten_with_beta_zero_is_not_read_back(tmp_path, beta):
    """gemm into an evicted 8 MiB tile: with beta = 0 the task takes it in W mode (the
    codelet table's ``overwrite``), so nothing of it is read back from disk; with
    beta = 1 it must be (and the sum is right either way)."""
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ooc_size_mb=256, ncpu=1,
                    scheduler="eager", hints="none") as rt:
        c = ops.fill(nl.empty((1024, 2048), (1024, 2048)), 1.0)          # 8 MiB, one tile
        others = [ops.fill(nl.empty((1024, 2048), (1024, 2048)), 2.0) for _ in range(2)]
        rt.wait()                                                        # c went to disk
        for t in others:
            t.free()
        a = ops.fill(nl.empty((1024, 8)), 0.5)
        b = ops.fill(nl.empty((8, 2048)), 0.25)
        rt.wait()
        rt.disk_traffic(reset=True)
        ops.gemm(a, b, beta=beta, out=c)
        rt.wait()
        read = rt.disk_traffic()["bytes_read"]
        np.testing.assert_array_equal(c.to_numpy(), np.full((1024, 2048), 1.0 + beta))
    if beta == 0:
        assert read < (1 << 20), read
    else:
        assert read >= (8 << 20), read


STOP_WITH_PREFETCHES = """
import sys, tempfile
import numpy as np
import nntile_lab as nl
rng = np.random.default_rng(7)
arrays = [rng.standard_normal((301, 577)).astype(np.float32) for _ in range(40)]
for it in range(4):
    with tempfile.TemporaryDirectory() as d:
        with nl.Runtime(memory_limit_mb=16, ooc_dir=d, ooc_size_mb=256, ncpu=2) as rt:
            tensors = [nl.from_numpy(a, (97, 129)) for a in arrays]   # 27 MiB > 16 MiB
            doubled = [nl.ops.scale(t, 2.0) for t in tensors]          # dirty tiles in RAM
            rt.wait()
            for t in tensors:          # prefetches into a RAM full of dirty tiles ...
                t.prefetch()
        print("stopped", it, flush=True)   # ... pending when the runtime stops
"""


@pytest.mark.slow
def test_stop_returns_with_prefetches_pending_into_a_full_ram():
    """Stopping with prefetches into RAM still pending (RAM full of dirty tiles, which a
    prefetch does not evict): every tile is freed and stop() returns — it used to wait
    forever in starpu_data_unregister for a prefetched tile freed before the others."""
    proc = subprocess.run([sys.executable, "-c", STOP_WITH_PREFETCHES], capture_output=True,
                          text=True, timeout=180, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.split().count("stopped") == 4, proc.stderr
