"""The PyTorch baseline is the same model as the HF-layout reference, and measures it."""
import numpy as np
import pytest

from tests.conftest import require

torch = require("torch")

from nntile_lab.bench import torch_baseline  # noqa: E402
from nntile_lab.nn.config import GPT2Config  # noqa: E402
from nntile_lab.reference.nanogpt import NanoGPT  # noqa: E402
from nntile_lab.reference.torch_gpt2 import TorchGPT2  # noqa: E402
from nntile_lab.spec import ExperimentSpec  # noqa: E402

CFG = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=16, vocab_size=97, n_inner=48)


@pytest.mark.parametrize("seed", [0, 5])
def test_same_init_as_reference(seed):
    ref = TorchGPT2(CFG, dtype=torch.float64, seed=seed).numpy_state_dict()
    nano = NanoGPT(CFG, dtype=torch.float64, seed=seed).hf_state_dict()
    assert nano.keys() == ref.keys()
    for k in ref:
        np.testing.assert_array_equal(nano[k], ref[k], err_msg=k)


@pytest.mark.parametrize("t", [16, 7])
def test_loss_and_grads_equal_reference(t):
    """Same weights (random, not the init) → same loss and gradients, float64."""
    rng = np.random.default_rng(t)
    ref = TorchGPT2(CFG, dtype=torch.float64, seed=1)
    state = {k: v + rng.standard_normal(v.shape) * 0.05
             for k, v in ref.numpy_state_dict().items()}
    ref.load_numpy_state_dict(state)
    nano = NanoGPT(CFG, dtype=torch.float64)
    nano.load_hf_state_dict(state)
    ids, labels = rng.integers(0, CFG.vocab_size, (2, 3, t))
    assert nano.forward_backward(ids, labels) == pytest.approx(ref.forward_backward(ids, labels),
                                                               rel=1e-12)
    g_ref, g_nano = ref.numpy_grad_state_dict(), nano.hf_grad_state_dict()
    assert g_nano.keys() == g_ref.keys()
    for k in g_ref:
        np.testing.assert_allclose(g_nano[k], g_ref[k], rtol=1e-9,
                                   atol=1e-12 * np.abs(g_ref[k]).max(), err_msg=k)


def test_bad_state_dict_is_named():
    nano = NanoGPT(CFG)
    state = nano.hf_state_dict()
    state["transformer.h.0.mlp.c_fc.weight"] = np.zeros((48, 32))   # (out, in): wrong layout
    with pytest.raises(ValueError, match="mlp.c_fc.weight"):
        nano.load_hf_state_dict(state)
    del state["transformer.h.0.mlp.c_fc.weight"]
    with pytest.raises(KeyError, match="mlp.c_fc.weight"):
        nano.load_hf_state_dict(state)


def test_measure_eager():
    res = torch_baseline.measure(CFG, 2, 16, steps=2, warmup=0, threads=1)
    flops = CFG.flops_per_token(16) * 2 * 16
    assert res["flops_per_step"] == flops and res["threads"] == 1
    assert res["gflops"] == pytest.approx(flops / res["step_time_s"] / 1e9)
    assert res["step_time_min_s"] <= res["step_time_s"] <= res["step_time_max_s"]
    assert len(res["step_times_s"]) == 2 and res["compile_time_s"] == 0.0
    assert res["adamw"] in ("fused", "foreach") and res["peak_rss_mb"] > 0
    # the first step's loss is the untrained model's: about log(vocab)
    assert res["first_loss"] == pytest.approx(np.log(CFG.vocab_size), rel=0.05)


def test_measure_from_spec_and_bad_input():
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=50, seq_len=8, batch=2,
                          measure_steps=1, warmup_steps=0)
    res = torch_baseline.measure(spec)
    assert (res["batch"], res["seq_len"], res["steps"], res["warmup"]) == (2, 8, 1, 0)
    with pytest.raises(ValueError, match="batch and seq_len"):
        torch_baseline.measure(CFG)
    with pytest.raises(ValueError, match="seq_len=17 exceeds n_positions=16"):
        torch_baseline.measure(CFG, 1, 17)


def test_bf16_only_with_hardware(monkeypatch):
    monkeypatch.setattr(torch_baseline, "cpu_has_bf16", lambda: False)
    with pytest.raises(ValueError, match="avx512_bf16"):
        torch_baseline.measure(CFG, 2, 16, bf16=True, steps=1)


@pytest.mark.slow
def test_measure_compiled_computes_the_same_loss():
    """torch.compile'd step: same first loss as eager, compile time reported apart."""
    eager = torch_baseline.measure(CFG, 2, 16, steps=1, warmup=0)
    comp = torch_baseline.measure(CFG, 2, 16, steps=1, warmup=0, compile=True)
    assert comp["compile"] and comp["compile_time_s"] > 0
    assert comp["first_loss"] == pytest.approx(eager["first_loss"], rel=1e-5)
