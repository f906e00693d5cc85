"""Every layer and composition against PyTorch autograd (float64) and against finite
differences of its own forward (``nn.gradcheck``), over random shapes and tilings; the
check itself catches a wrong backward."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab import nn
from nntile_lab.nn.backend import ops
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.gradcheck import GradcheckError, gradcheck
from tests.conftest import require
from tests.nn.variants import ParallelBlock, PostNormBlock

torch = require("torch")
F = torch.nn.functional


def sub(p: dict, prefix: str) -> dict:
    return {k.removeprefix(prefix + "."): v for k, v in p.items() if k.startswith(prefix + ".")}


def t_linear(x, p):
    y = x @ p["weight"]
    return y + p["bias"] if "bias" in p else y


def t_layer_norm(x, p, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), p["weight"], p["bias"], eps)


def t_gelu(x, p=None):
    return F.gelu(x, approximate="tanh")


def t_attention(x, p, H):
    B, T, E = x.shape
    D = E // H
    q, k, v = (t_linear(x, sub(p, n)).view(B, T, H, D).transpose(1, 2) for n in "qkv")
    att = q @ k.transpose(-1, -2) / math.sqrt(D)
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E)
    return t_linear(y, sub(p, "c_proj"))


def t_mlp(x, p):
    return t_linear(t_gelu(t_linear(x, sub(p, "c_fc"))), sub(p, "c_proj"))


def t_block(x, p, H):
    x = x + t_attention(t_layer_norm(x, sub(p, "ln_1")), sub(p, "attn"), H)
    return x + t_mlp(t_layer_norm(x, sub(p, "ln_2")), sub(p, "mlp"))


def t_parallel(x, p, H):
    h = t_layer_norm(x, sub(p, "ln"))
    return x + t_attention(h, sub(p, "attn"), H) + t_mlp(h, sub(p, "mlp"))


def t_post_norm(x, p, H):
    x = t_layer_norm(x + t_attention(x, sub(p, "attn"), H), sub(p, "ln_1"))
    return t_layer_norm(x + t_mlp(x, sub(p, "mlp")), sub(p, "ln_2"))


@st.composite
def shapes(draw):
    """B, T, n_head, head size, n_inner and a tile for each (None: whole)."""
    B, T, H, D, Fi = (draw(st.integers(1, n)) for n in (3, 7, 3, 4, 12))
    E = H * D
    tile = lambda n: draw(st.one_of(st.none(), st.integers(1, n)))  # noqa: E731
    return dict(B=B, T=T, H=H, E=E, F=Fi, bt=tile(B), st=tile(T), et=tile(E), ht=tile(H),
                it=tile(Fi), seed=draw(st.integers(0, 2**31)))


def _x(s, rng):
    x = rng.standard_normal((s["B"], s["T"], s["E"])).astype(np.float32)
    return x, (s["bt"] or s["B"], s["st"] or s["T"], s["et"] or s["E"])


def _both(layer, inputs, tiles, ref, seed):
    """Against PyTorch, then against finite differences."""
    gradcheck(layer, inputs, tiles=tiles, reference=ref, seed=seed)
    gradcheck(layer, inputs, tiles=tiles, seed=seed)


SETTINGS = settings(max_examples=8, deadline=None)


@SETTINGS
@given(shapes(), st.booleans())
def test_linear(rt1, s, bias):
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    layer = nn.Linear(s["E"], s["F"], bias=bias, in_tile=s["et"], out_tile=s["it"])
    _both(layer, [x], [tx], t_linear, s["seed"])


@SETTINGS
@given(shapes())
def test_layer_norm(rt1, s):
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    layer = nn.LayerNorm(s["E"], tile=s["et"])
    layer.weight.init = nn.Init(std=1.0)     # γ, β not 1 and 0: their gradients matter
    layer.bias.init = nn.Init(std=1.0)
    _both(layer, [x], [tx], t_layer_norm, s["seed"])


@SETTINGS
@given(shapes())
def test_gelu(rt1, s):
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    _both(nn.GELU(), [x], [tx], t_gelu, s["seed"])


@SETTINGS
@given(shapes())
def test_embedding(rt1, s):
    rng = np.random.default_rng(s["seed"])
    V = s["F"] + 1
    ids = rng.integers(0, V, (s["B"], s["T"]))
    layer = nn.Embedding(V, s["E"], row_tile=s["it"], embd_tile=s["et"])
    _both(layer, [ids], [(s["bt"] or s["B"], s["st"] or s["T"])],
          lambda ids, p: p["weight"][ids], s["seed"])


@SETTINGS
@given(shapes())
def test_attention(rt1, s):
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    layer = nn.Attention(s["E"], s["H"], embd_tile=s["et"], head_tile=s["ht"],
                         init_std=0.5, proj_init_std=0.5)
    _both(layer, [x], [tx], lambda x, p: t_attention(x, p, s["H"]), s["seed"])


@SETTINGS
@given(shapes(), st.booleans())
def test_lm_head(rt1, s, shared_tiles):
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    V = s["F"] + 1
    labels = rng.integers(0, V, (s["B"], s["T"]))
    layer = nn.LMHead(s["E"], V, embd_tile=s["et"], vocab_tile=s["it"], init_std=0.5)

    def ref(x, labels, p):
        logits = x @ p["weight"].T
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
    _both(layer, [x, labels], [tx, tx[:2]], ref, s["seed"])


@pytest.mark.parametrize("kind", ["mlp", "block", "parallel", "post_norm"])
@settings(max_examples=4, deadline=None)
@given(s=shapes())
def test_compositions(rt1, kind, s):
    """No backward written: the tape runs the leaves' backwards (residual gradients shared
    in place, a value feeding two branches summed)."""
    rng = np.random.default_rng(s["seed"])
    x, tx = _x(s, rng)
    E, H = s["E"], s["H"]
    cfg = GPT2Config(n_layer=1, n_head=H, n_embd=E, n_positions=s["T"], vocab_size=5,
                     n_inner=s["F"], embd_tile=s["et"], inner_tile=s["it"], head_tile=s["ht"])
    layer, ref = {
        "mlp": (nn.MLP(E, s["F"], embd_tile=s["et"], inner_tile=s["it"], init_std=0.5,
                       proj_init_std=0.5), t_mlp),
        "block": (nn.Block(E, H, s["F"], embd_tile=s["et"], inner_tile=s["it"],
                           head_tile=s["ht"], init_std=0.5, proj_init_std=0.5),
                  lambda x, p: t_block(x, p, H)),
        "parallel": (ParallelBlock(cfg), lambda x, p: t_parallel(x, p, H)),
        "post_norm": (PostNormBlock(cfg), lambda x, p: t_post_norm(x, p, H)),
    }[kind]
    _both(layer, [x], [tx], ref, s["seed"])


def test_a_wrong_backward_is_caught(rt1):
    class Doubled(nn.GELU):
        def backward(self, ctx, saved, dy, dx=None):
            g = super().backward(ctx, saved, dy, dx)
            ops.add(g, g)                      # twice the gradient: a bug
            return g
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    with pytest.raises(GradcheckError, match="input 0 is off"):
        gradcheck(Doubled(), [x], reference=t_gelu)
    with pytest.raises(GradcheckError, match="direction"):
        gradcheck(Doubled(), [x])
