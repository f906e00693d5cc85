"""The tiled Llama (nl.Llama) against float64 PyTorch: our plain-PyTorch Llama
(nntile_lab.reference.torch_llama, float64 throughout) over random sizes, grouped-query heads,
rotary bases and tilings, and Hugging Face's LlamaForCausalLM (its names, layouts and
numbers); an optimizer step against torch.optim; the clear errors of bad configs and state
dicts. Every random input is drawn from the test's own strategy or a seed it draws."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab.optim import SGD, Adam, AdamW
from tests.conftest import cond_err, rel_err, require

torch = require("torch")
from nntile_lab.reference.torch_llama import TorchLlama  # noqa: E402

# float32 through a few layers against float64: the gradients' norm-wise errors measured
# here are 1e-7 to 1e-6 (a few float32 roundings per op, sums in double); a wrong term (a
# transposed projection, a head paired with the wrong key/value head, a rotation by the
# wrong angle) moves a gradient by O(1)
TOL = 1e-5


@st.composite
def llama_case(draw):
    """(config, batch, sequence, seed): 1–2 layers, 1–3 key/value heads each shared by 1–3
    query heads, even head sizes, any tiling with whole query groups per head tile."""
    n_kv = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    n_head, hs = n_kv * group, 2 * draw(st.integers(1, 3))
    E, F, V = n_head * hs, draw(st.integers(1, 40)), draw(st.integers(5, 60))
    B, T = draw(st.integers(1, 3)), draw(st.integers(1, 8))
    P = T + draw(st.integers(0, 5))

    def tile(n):
        return draw(st.one_of(st.none(), st.integers(1, n)))
    cfg = nl.LlamaConfig(
        n_layer=draw(st.integers(1, 2)), n_head=n_head, n_kv_head=n_kv, n_embd=E, n_inner=F,
        vocab_size=V, n_positions=P, rope_theta=draw(st.sampled_from([10000.0, 500000.0, 3.7])),
        rms_norm_eps=draw(st.sampled_from([1e-6, 1e-5])), batch_tile=tile(B), seq_tile=tile(T),
        embd_tile=tile(E), inner_tile=tile(F), vocab_tile=tile(V),
        head_tile=draw(st.one_of(st.none(), st.integers(1, n_kv).map(lambda k: k * group))))
    return cfg, B, T, draw(st.integers(0, 2**32 - 1))


def batch(cfg, B, T, seed):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T)))


def reference(cfg, state, ids, labels):
    ref = TorchLlama(cfg, dtype=torch.float64)
    ref.load_numpy(state)
    loss = ref(torch.tensor(ids), torch.tensor(labels))
    loss.backward()
    return ref, loss.item(), ref.numpy_grads()


@settings(max_examples=15)
@given(llama_case())
def test_loss_and_every_gradient_match_float64_torch(rt, case):
    cfg, B, T, seed = case
    ids, labels = batch(cfg, B, T, seed)
    model = nl.Llama(cfg, seed=seed % 1000)
    state = model.state_dict()
    loss = model.forward_backward(ids, labels)
    _, want_loss, want = reference(cfg, state, ids, labels)
    assert abs(loss - want_loss) <= TOL * abs(want_loss)
    grads = model.grad_state_dict()
    assert list(grads) == list(want) == list(state)       # Hugging Face's order
    # a gradient whose exact value is zero (the queries' with one token: its softmax has one
    # entry) comes out as 0 here and as rounding noise (1e-24) in float64: its error is
    # measured against the model's whole gradient, a millionth of which is far below any
    # wrong term's O(1)
    floor = 1e-6 * np.sqrt(sum(np.linalg.norm(w) ** 2 for w in want.values()))
    for name, g in grads.items():
        assert g.shape == state[name].shape == want[name].shape, name
        err = np.linalg.norm(np.asarray(g, np.float64) - want[name])
        assert err <= TOL * max(np.linalg.norm(want[name]), floor), (name, rel_err(g, want[name]))
    assert model.loss(ids, labels) == pytest.approx(loss, rel=1e-6)
    model.free()


def test_hugging_faces_llama_takes_its_state_dict(rt1):
    """The state dict loads into LlamaForCausalLM unchanged (names, (out, in) layouts,
    untied head) and gives its loss and gradients: Hugging Face computes the RMS norm and the
    rotary angles in float32 even in a float64 model, hence the tolerance."""
    transformers = require("transformers")
    cfg = nl.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=16, n_inner=24,
                         vocab_size=50, n_positions=16, seq_tile=3, head_tile=2, embd_tile=5)
    hf_cfg = transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
        rms_norm_eps=cfg.rms_norm_eps, rope_theta=cfg.rope_theta, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False)
    hf = transformers.LlamaForCausalLM(hf_cfg).double()
    ids, labels = batch(cfg, 3, 9, 0)
    model = nl.Llama(cfg, seed=1)
    state = model.state_dict()
    loss = model.forward_backward(ids, labels)
    assert set(state) == set(hf.state_dict())
    hf.load_state_dict({k: torch.tensor(v, dtype=torch.float64) for k, v in state.items()})
    logits = hf(torch.tensor(ids)).logits
    hf_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50),
                                                torch.tensor(labels).reshape(-1))
    hf_loss.backward()
    assert loss == pytest.approx(hf_loss.item(), rel=TOL)
    grads = model.grad_state_dict()
    for name, p in hf.named_parameters():
        assert rel_err(grads[name], p.grad.numpy()) <= TOL, name
    model.free()


def optimizers(model, ref, name):
    """(ours, torch's) for ``name``, with the same settings; weight decay on the matrices
    only (nanoGPT's grouping, as nntile_lab.optim applies it)."""
    params = list(ref.parameters())
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    if name == "adamw":
        return (AdamW(model, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
                torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8))
    if name == "adam":
        return (Adam(model, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
                torch.optim.Adam(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8))
    if name == "sgd":
        return SGD(model, lr=0.1, momentum=0.0, weight_decay=0.1), torch.optim.SGD(groups, lr=0.1)
    return (SGD(model, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
            torch.optim.SGD(groups, lr=0.1, momentum=0.9, nesterov=True))


@pytest.mark.parametrize("optimizer", ["adamw", "adam", "sgd", "sgd_nesterov"])
def test_two_optimizer_steps_equal_torch(rt1, optimizer):
    cfg = nl.LlamaConfig(n_layer=2, n_head=6, n_kv_head=2, n_embd=24, n_inner=40,
                         vocab_size=61, n_positions=12, batch_tile=2, seq_tile=5, embd_tile=10,
                         inner_tile=16, head_tile=3, vocab_tile=17)
    model = nl.Llama(cfg, seed=5)
    ref = TorchLlama(cfg, dtype=torch.float64)
    ref.load_numpy(model.state_dict())
    opt, topt = optimizers(model, ref, optimizer)
    before = model.state_dict()
    for step in range(2):
        ids, labels = batch(cfg, 3, 11, step)
        model.forward_backward(ids, labels)
        opt.step(clip_norm=1.0)
        topt.zero_grad()
        ref(torch.tensor(ids), torch.tensor(labels)).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        topt.step()
        with torch.no_grad():   # the next step from the parameters as ours are stored
            for p in ref.parameters():
                p.copy_(p.float())
    after, want = model.state_dict(), ref.numpy_state()
    # the update, against its size plus the float32 rounding of the parameters it moved (a
    # norm weight near 1 moved by 1e-4 keeps only ~3 digits of the move in float32)
    for k in after:
        delta = want[k] - before[k]
        assert cond_err(after[k] - before[k], delta, abs(delta) + 2**-22 * abs(before[k])) \
            <= 1e-4, k
    model.free()


BASE = nl.LlamaConfig(n_layer=1, n_head=4, n_kv_head=2, n_embd=16, n_inner=24, vocab_size=50,
                      n_positions=16)


def test_bad_configs_are_one_clear_error():
    with pytest.raises(ValueError, match=r"n_head=6 is not a multiple of n_kv_head=4: .* one "
                                         r"of \[1, 2, 3, 6\]"):
        nl.LlamaConfig(n_head=6, n_kv_head=4, n_embd=24)
    with pytest.raises(ValueError, match=r"head size n_embd/n_head = 20/4 = 5 is odd: rotary"):
        nl.LlamaConfig(n_head=4, n_embd=20)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=rf"rope_theta={bad!r} must be a finite number > 0"):
            nl.LlamaConfig(rope_theta=bad)
    with pytest.raises(ValueError, match=r"rms_norm_eps=0.0 must be a finite number > 0"):
        nl.LlamaConfig(rms_norm_eps=0.0)
    with pytest.raises(ValueError, match=r"head_tile=3 is not a multiple of the query group "
                                         r"n_head/n_kv_head=2"):
        nl.LlamaConfig(n_head=4, n_kv_head=2, n_embd=16, head_tile=3)
    with pytest.raises(ValueError, match=r"n_embd=30 is not divisible by n_head=4"):
        nl.LlamaConfig(n_embd=30, n_head=4)
    assert nl.LlamaConfig(n_embd=4096, n_head=32).n_inner == 11008   # Llama's own rule


def test_bad_state_dicts_and_inputs_are_one_clear_error_before_any_task(rt1):
    model = nl.Llama(BASE, seed=3)
    state = model.state_dict()
    assert state["model.layers.0.self_attn.k_proj.weight"].shape == (8, 16)   # (out, in)
    gpt2 = nl.GPT2(nl.GPT2Config(n_layer=1, n_head=4, n_embd=16, n_positions=16,
                                 vocab_size=50))
    with pytest.raises(ValueError, match=r"this is a GPT-2 state dict .* not a Llama's"):
        model.load_state_dict(gpt2.state_dict())
    gpt2.free()
    other = dict(state, **{"model.layers.0.mlp.up_proj.weight": np.zeros((25, 16), np.float32)})
    with pytest.raises(ValueError, match=r"up_proj.weight has shape \(25, 16\) \(out, in\) but "
                                         r"this Llama needs \(24, 16\)"):
        model.load_state_dict(other)
    with pytest.raises(ValueError, match=r"missing .*model.layers.1"):
        nl.Llama(dataclasses.replace(BASE, n_layer=2)).load_state_dict(state)
    with pytest.raises(ValueError, match="sequence length 17 exceeds n_positions=16"):
        model.forward_backward(np.zeros((2, 17), np.int64), np.zeros((2, 17), np.int64))
    with pytest.raises(ValueError, match=r"input_ids\[\(0, 1\)\] = 50 is not a token id"):
        model.loss(np.array([[0, 50]]), np.array([[0, 1]]))
    assert all(np.array_equal(model.state_dict()[k], v) for k, v in state.items())
    model.free()
