"""The PyTorch reference GPT-2 against an independent float64 numpy implementation,
finite differences, HF's parameter layout, GPT-2's init, and the FLOP count."""
import math

import numpy as np
import pytest
import torch

from nntile_lab.nn.config import GPT2Config
from nntile_lab.reference.torch_gpt2 import TorchGPT2
from tests.torch_adapter import TinyConfig

CFG = TinyConfig(n_layer=2, n_head=2, n_embd=8, n_positions=6, vocab_size=11)


def ids(shape, vocab, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, shape)


def np_logits(sd, cfg, x):
    """GPT-2 forward written from the paper/HF formulas in float64 numpy, head by head."""
    def ln(h, p):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / np.sqrt(var + cfg.layer_norm_epsilon) * sd[p + ".weight"] \
            + sd[p + ".bias"]

    def lin(h, p):
        return h @ sd[p + ".weight"] + sd[p + ".bias"]

    def gelu(h):
        return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))

    sd = {k: v.astype(np.float64) for k, v in sd.items()}
    b, t = x.shape
    e, nh = cfg.n_embd, cfg.n_head
    d = e // nh
    h = sd["transformer.wte.weight"][x] + sd["transformer.wpe.weight"][:t]
    for i in range(cfg.n_layer):
        p = f"transformer.h.{i}"
        qkv = lin(ln(h, p + ".ln_1"), p + ".attn.c_attn")
        att = np.zeros((b, t, e))
        for bi in range(b):
            for hd in range(nh):
                q, k, v = (qkv[bi, :, j * e + hd * d: j * e + (hd + 1) * d] for j in range(3))
                s = q @ k.T / math.sqrt(d)
                s[np.triu_indices(t, 1)] = -np.inf
                w = np.exp(s - s.max(-1, keepdims=True))
                att[bi, :, hd * d:(hd + 1) * d] = (w / w.sum(-1, keepdims=True)) @ v
        h = h + lin(att, p + ".attn.c_proj")
        h = h + lin(gelu(lin(ln(h, p + ".ln_2"), p + ".mlp.c_fc")), p + ".mlp.c_proj")
    return ln(h, "transformer.ln_f") @ sd["transformer.wte.weight"].T


def np_loss(logits, labels):
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    return float(np.mean(lse - np.take_along_axis(logits, labels[..., None], -1)[..., 0]))


def randomised(model, seed=1):
    """Non-trivial weights (LN and biases away from 1/0) so every term matters."""
    rng = np.random.default_rng(seed)
    sd = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in model.numpy_state_dict().items()}
    model.load_numpy_state_dict(sd)
    return sd


def test_hf_names_and_layouts():
    sd = TorchGPT2(CFG).numpy_state_dict()
    e, f, v, p = 8, 32, 11, 6
    want = {"transformer.wte.weight": (v, e), "transformer.wpe.weight": (p, e),
            "transformer.ln_f.weight": (e,), "transformer.ln_f.bias": (e,)}
    for i in range(2):
        h = f"transformer.h.{i}."
        want.update({h + "ln_1.weight": (e,), h + "ln_1.bias": (e,),
                     h + "attn.c_attn.weight": (e, 3 * e), h + "attn.c_attn.bias": (3 * e,),
                     h + "attn.c_proj.weight": (e, e), h + "attn.c_proj.bias": (e,),
                     h + "ln_2.weight": (e,), h + "ln_2.bias": (e,),
                     h + "mlp.c_fc.weight": (e, f), h + "mlp.c_fc.bias": (f,),
                     h + "mlp.c_proj.weight": (f, e), h + "mlp.c_proj.bias": (e,)})
    assert {k: a.shape for k, a in sd.items()} == want
    assert all(a.dtype == np.float32 for a in sd.values())


@pytest.mark.parametrize("n_inner", [None, 12])
def test_forward_and_loss_match_numpy(n_inner):
    cfg = TinyConfig(n_layer=2, n_head=2, n_embd=8, n_positions=6, vocab_size=11,
                     n_inner=n_inner)
    model = TorchGPT2(cfg, dtype=np.float64)
    sd = randomised(model)
    x, y = ids((3, 5), 11), ids((3, 5), 11, seed=2)
    want = np_logits(sd, cfg, x)
    got = model(x).detach().numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert model.loss(x, y) == pytest.approx(np_loss(want, y), rel=1e-12)
    assert model.forward_backward(x, y) == pytest.approx(np_loss(want, y), rel=1e-12)


def test_float32_model_close_to_float64():
    m64 = TorchGPT2(CFG, dtype="float64")
    m32 = TorchGPT2(CFG)
    m32.load_numpy_state_dict(randomised(m64))
    x = ids((2, 6), 11)
    assert m32.loss(x, x) == pytest.approx(m64.loss(x, x), rel=1e-5)


@pytest.mark.slow
def test_gradients_match_finite_differences():
    model = TorchGPT2(CFG, dtype=torch.float64)
    sd = randomised(model)
    x, y = ids((2, 5), 11), ids((2, 5), 11, seed=3)
    model.forward_backward(x, y)
    grads = model.numpy_grad_state_dict()
    assert grads.keys() == sd.keys()
    rng, h = np.random.default_rng(4), 1e-6
    for name, g in grads.items():
        for flat in rng.choice(g.size, size=min(3, g.size), replace=False):
            idx = np.unravel_index(flat, g.shape)
            vals = []
            for sign in (1, -1):
                pert = dict(sd)
                pert[name] = sd[name].copy()
                pert[name][idx] += sign * h
                model.load_numpy_state_dict(pert)
                vals.append(model.loss(x, y))
            fd = (vals[0] - vals[1]) / (2 * h)
            assert g[idx] == pytest.approx(fd, rel=1e-5, abs=1e-8), (name, idx)


def test_accumulate_and_grad_scale():
    model = TorchGPT2(CFG, dtype="float64")
    a, b = ids((2, 4), 11, 5), ids((2, 4), 11, 6)
    model.forward_backward(a, a)
    ga = model.numpy_grad_state_dict()
    model.forward_backward(b, b)
    gb = model.numpy_grad_state_dict()
    model.forward_backward(a, a, grad_scale=0.5)
    model.forward_backward(b, b, accumulate=True, grad_scale=0.5)
    for k, g in model.numpy_grad_state_dict().items():
        np.testing.assert_allclose(g, 0.5 * (ga[k] + gb[k]), rtol=1e-12, atol=1e-15)


def test_init_is_gpt2s_and_seeded():
    cfg = TinyConfig(n_layer=3, n_head=2, n_embd=64, n_positions=8, vocab_size=500)
    sd = TorchGPT2(cfg, seed=7).numpy_state_dict()
    assert np.std(sd["transformer.wte.weight"]) == pytest.approx(0.02, rel=0.05)
    assert np.std(sd["transformer.h.0.attn.c_attn.weight"]) == pytest.approx(0.02, rel=0.05)
    for name in ("attn.c_proj.weight", "mlp.c_proj.weight"):
        assert np.std(sd[f"transformer.h.1.{name}"]) == pytest.approx(0.02 / math.sqrt(6),
                                                                      rel=0.1)
    for k, v in sd.items():
        if k.endswith(".bias"):
            assert not v.any(), k
        elif ".ln_" in k:
            assert (v == 1).all(), k
    same, other = TorchGPT2(cfg, seed=7).numpy_state_dict(), TorchGPT2(cfg, seed=8)
    assert all(np.array_equal(sd[k], same[k]) for k in sd)
    assert not np.array_equal(sd["transformer.wte.weight"],
                              other.numpy_state_dict()["transformer.wte.weight"])


def test_loss_at_init_is_about_log_vocab():
    model = TorchGPT2(TinyConfig(vocab_size=64, n_positions=16))
    x = ids((4, 16), 64)
    assert model.loss(x, ids((4, 16), 64, seed=9)) == pytest.approx(math.log(64), abs=0.05)


def test_lm_head_is_tied_to_wte():
    model = TorchGPT2(CFG)
    assert "lm_head.weight" not in model.numpy_state_dict()
    x = np.array([[0, 1, 2]])  # token 5 is not an input: only the head reads its row
    before = model(x).detach().clone()
    with torch.no_grad():
        model.transformer.wte.weight[5] += 1.0
    after = model(x).detach()
    assert not torch.equal(after[..., 5], before[..., 5])
    assert torch.equal(after[..., :5], before[..., :5])


def test_load_accepts_hf_extras_and_names_problems():
    model = TorchGPT2(CFG)
    sd = model.numpy_state_dict()
    hf = {**sd, "lm_head.weight": sd["transformer.wte.weight"],
          "transformer.h.0.attn.bias": np.ones((1, 1, 6, 6)),
          "transformer.h.1.attn.masked_bias": np.array(-1e4)}
    model.load_numpy_state_dict(hf)
    with pytest.raises(KeyError, match="missing.*transformer.ln_f.bias.*unexpected.*extra"):
        model.load_numpy_state_dict({**{k: v for k, v in sd.items()
                                        if k != "transformer.ln_f.bias"}, "extra": 1})
    with pytest.raises(ValueError, match=r"transformer.wpe.weight: shape \(5, 8\).*\(6, 8\)"):
        model.load_numpy_state_dict({**sd, "transformer.wpe.weight": np.zeros((5, 8))})


@pytest.mark.parametrize(("x", "y", "needle"), [
    (np.array([[0, 11]]), None, r"ids must lie in \[0, 11\), got range \[0, 11\]"),
    (np.zeros((1, 7), int), None, "seq_len=7 > n_positions=6"),
    (np.zeros(4, int), None, "2-D integer array"),
    (np.zeros((1, 3), int), np.zeros((1, 2), int), r"labels shape \(1, 2\)"),
])
def test_bad_inputs_are_named(x, y, needle):
    with pytest.raises(ValueError, match=needle):
        TorchGPT2(CFG).loss(x, x if y is None else y)


def test_bad_dtype_and_heads():
    with pytest.raises(ValueError, match="float32 or float64, got 'float16'"):
        TorchGPT2(CFG, dtype="float16")
    with pytest.raises(ValueError, match="n_embd=8 must be divisible by n_head=3"):
        TorchGPT2(TinyConfig(n_embd=8, n_head=3))


@pytest.mark.parametrize("n_inner", [None, 20])
def test_param_and_flop_counts(n_inner):
    cfg = TinyConfig(n_layer=2, n_head=2, n_embd=8, n_positions=6, vocab_size=11,
                     n_inner=n_inner)
    sd = TorchGPT2(cfg).numpy_state_dict()
    total = sum(v.size for v in sd.values())
    ours = GPT2Config(**{f: getattr(cfg, f) for f in ("n_layer", "n_head", "n_embd",
                                                       "n_positions", "vocab_size", "n_inner")})
    assert ours.num_params(with_positions=True) == total     # read from the layers' tree
    n = total - sd["transformer.wpe.weight"].size
    assert ours.num_params() == n
    assert ours.flops_per_token(5) == 6 * n + 12 * 2 * 8 * 5  # PaLM's closed form
