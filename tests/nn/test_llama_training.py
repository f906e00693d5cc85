"""The Llama trains where GPT-2 does: under the bf16 precision modes (gradients within bf16's
rounding of float64 PyTorch's, and not float32's: the mode really rounds), out of core (losses
and parameters bit-identical to the run in memory, the tiles through the disk node) and on
the OpenCL worker (a whole step confined to it computes what the CPU does)."""
import tempfile

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab.optim import AdamW
from tests.conftest import need_opencl, rel_err, require

torch = require("torch")
from nntile_lab.reference.torch_llama import TorchLlama  # noqa: E402

U = 2.0**-8    # bf16's rounding: docs/precision.md (GPT-2's gradients: ~1.5u bf16, 0.5u storage)
SMALL = nl.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=48, vocab_size=61,
                       n_positions=16, batch_tile=2, seq_tile=5, embd_tile=12, inner_tile=20,
                       head_tile=2, vocab_tile=20)


def batches(cfg, n, B=3, T=13, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T)))
            for _ in range(n)]


@pytest.mark.parametrize("precision,low,high", [("bf16", 0.2 * U, 4 * U),
                                                ("bf16-storage", 0.05 * U, 2 * U)])
def test_bf16_modes_round_as_they_should(rt1, precision, low, high):
    (ids, labels), = batches(SMALL, 1)
    model = nl.Llama(SMALL, seed=1, precision=precision)
    state = model.state_dict()
    loss = model.forward_backward(ids, labels)
    grads = model.grad_state_dict()
    model.free()
    ref = TorchLlama(SMALL, dtype=torch.float64)
    ref.load_numpy(state)
    want = ref(torch.tensor(ids), torch.tensor(labels))
    want.backward()
    assert abs(loss - want.item()) <= high * abs(want.item())
    errs = {k: rel_err(g, ref.numpy_grads()[k]) for k, g in grads.items()}
    assert max(errs.values()) <= high, errs
    # a mode that silently computed in float32 would err by ~1e-7 (u/10⁴): far below
    assert max(errs.values()) >= low, errs


def _train(cfg, data, *, where="cpu", ooc=False, nopencl=0):
    kw = dict(memory_limit_mb=32, ooc_dir=tempfile.mkdtemp(), ooc_size_mb=512) if ooc else {}
    with nl.Runtime(scheduler="eager" if not nopencl else "dmda", ncpu=1, nopencl=nopencl,
                    **kw) as rt:
        model = nl.Llama(cfg, seed=0)
        opt = AdamW(model, lr=1e-2, weight_decay=0.1)
        with rt.on(where):
            losses = []
            for ids, labels in data:
                losses.append(model.forward_backward(ids, labels))
                opt.step(clip_norm=1.0)
            rt.wait()
        state, traffic, used = model.state_dict(), rt.disk_traffic(), rt.memory_used()
        model.free()
    return losses, state, traffic, used


def test_out_of_core_training_equals_in_memory():
    """~3.6 M parameters (58 MiB of weights, gradients and Adam moments) under a 32 MiB cap
    with a disk node: one worker, so both runs add in the same order."""
    cfg = nl.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=256, n_inner=512,
                         n_positions=64, vocab_size=8192, batch_tile=2, inner_tile=256,
                         head_tile=2, vocab_tile=1024)
    data = batches(cfg, 3, B=4, T=64)
    ram, state_ram, none, _ = _train(cfg, data)
    assert none["bytes_written"] == 0
    ooc, state_ooc, traffic, used = _train(cfg, data, ooc=True)
    assert ooc == ram                                    # bit-identical losses
    for k, v in state_ram.items():
        assert np.array_equal(v, state_ooc[k]), k
    assert used <= 32 << 20
    state_mb = 16 * cfg.num_params() / 2**20
    assert traffic["bytes_written"] > (state_mb - 32) * 2**20, traffic
    assert traffic["bytes_read"] > (state_mb - 32) * 2**20, traffic


def test_a_step_confined_to_the_opencl_worker_computes_what_the_cpu_does():
    """Every op of a Llama step (rotary positions, RMS norm, the SiLU gate, grouped-query
    attention, cross-entropy, AdamW) runs on the OpenCL worker (PoCL here)."""
    need_opencl()
    data = batches(SMALL, 3)
    cpu, state_cpu, _, _ = _train(SMALL, data, nopencl=1)
    ocl, state_ocl, _, _ = _train(SMALL, data, where="opencl", nopencl=1)
    # the sums' order differs (work-group trees), exp is OpenCL's: float32 roundings apart
    assert np.allclose(ocl, cpu, rtol=1e-5, atol=0)
    for k, v in state_cpu.items():
        assert rel_err(state_ocl[k], v) <= 1e-5, k
