"""The PyTorch Llama references: the fast one (the benchmark's baseline: fused attention with
grouped-query heads, F.rms_norm, cached rotary tables) computes what the plain one does, in
float64, loss and every gradient; and both are Hugging Face's LlamaForCausalLM (its names,
layouts and values, to its float32 RMS norm and rotary angles)."""
import numpy as np
import pytest

from nntile_lab.nn.config import LlamaConfig
from tests.conftest import rel_err, require

torch = require("torch")
from nntile_lab.reference.torch_llama import TorchLlama  # noqa: E402

CFG = LlamaConfig(n_layer=2, n_head=6, n_kv_head=2, n_embd=24, n_inner=40, vocab_size=53,
                  n_positions=16, rope_theta=500000.0)


def run(model, ids, labels):
    loss = model(ids, labels)
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_fast_llama_is_the_plain_one(seed):
    state = TorchLlama(CFG, torch.float64, seed=seed).numpy_state()
    rng = np.random.default_rng(seed)
    ids = torch.tensor(rng.integers(0, CFG.vocab_size, (3, 11)))
    labels = torch.tensor(rng.integers(0, CFG.vocab_size, (3, 11)))
    results = []
    for fast in (False, True):
        model = TorchLlama(CFG, torch.float64, fast=fast)
        model.load_numpy(state)
        results.append(run(model, ids, labels))
    (loss, grads), (fast_loss, fast_grads) = results
    assert abs(fast_loss - loss) <= 1e-13 * abs(loss)
    for name, g in grads.items():
        assert rel_err(fast_grads[name], g) <= 1e-12, name


def test_hugging_faces_llama_is_the_reference():
    transformers = require("transformers")
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=53, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=16,
        rms_norm_eps=CFG.rms_norm_eps, rope_theta=CFG.rope_theta, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False)).double()
    ours = TorchLlama(CFG, torch.float64, seed=4)
    state = ours.numpy_state()
    assert list(state) == list(hf.state_dict())          # names and order
    hf.load_state_dict({n: torch.tensor(v) for n, v in state.items()})
    rng = np.random.default_rng(2)
    ids = torch.tensor(rng.integers(0, 53, (2, 13)))
    labels = torch.tensor(rng.integers(0, 53, (2, 13)))
    loss, grads = run(ours, ids, labels)
    logits = hf(ids).logits
    hf_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 53), labels.reshape(-1))
    hf_loss.backward()
    # Hugging Face's RMS norm and rotary angles are float32 even in this float64 model
    assert abs(hf_loss.item() - loss) <= 1e-6 * abs(loss)
    for name, p in hf.named_parameters():
        assert rel_err(p.grad.numpy(), grads[name]) <= 1e-5, name
