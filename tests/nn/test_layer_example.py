"""The smallest complete layer, as docs/adding-a-layer.md shows it: a learned per-feature
scale (CaiT's LayerScale), its forward and backward from tiled ops, its gradient check,
and a block using it — trained, planned and dry-run like any built-in layer."""
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab import memory, nn
from nntile_lab.nn.backend import ops
from nntile_lab.nn.config import GPT2Config, register_model
from nntile_lab.nn.gradcheck import gradcheck
from nntile_lab.tensor import TiledTensor
from tests.conftest import require
from tests.nn.variants import VariantGPT


class LayerScale(nn.Layer):
    """y = x·γ per feature (the last axis); γ starts at ``init``."""

    @dataclass
    class Saved(nn.Record):
        x: TiledTensor              # the input: dγ = Σ x·dy

    def __init__(self, n: int, *, tile: int | None = None, init: float = 0.1):
        super().__init__()
        self.n = n
        self.weight = nn.Param((n,), (tile,), init=nn.Init(value=init))

    def forward(self, ctx, x):
        self.expect(x, "inputs", size=self.n, tile=self.weight.tile_shape[0])
        y = ops.mul_fiber(self.weight.value, ops.copy(x), axis=x.ndim - 1)
        return y, self.Saved(x)

    def backward(self, ctx, saved, dy, dx=None):
        """dγ += Σ x·dy (all but the last axis); dx (+)= γ·dy."""
        with ctx.weight_grads():
            ops.sum_fiber(ctx.temp(ops.mul(saved.x, dy)), axis=dy.ndim - 1,
                          out=self.weight.grad, beta=1.0)
        g = ops.mul_fiber(self.weight.value, ops.copy(dy), axis=dy.ndim - 1)
        if dx is None:
            return g
        ops.add(ctx.temp(g), dx)
        return dx


class ScaledBlock(nn.Block):
    """GPT-2's block with each branch scaled before its residual add."""

    def __init__(self, c):
        super().__init__(c.n_embd, c.n_head, c.n_inner, embd_tile=c.embd_tile,
                         inner_tile=c.inner_tile, head_tile=c.head_tile)
        self.ls_1 = LayerScale(c.n_embd, tile=c.embd_tile)
        self.ls_2 = LayerScale(c.n_embd, tile=c.embd_tile)

    def forward(self, x):
        x = x + self.ls_1(self.attn(self.ln_1(x)))
        return x + self.ls_2(self.mlp(self.ln_2(x)))


@dataclass
class ScaledConfig(GPT2Config):
    pass


class ScaledGPT(VariantGPT):
    config_class = ScaledConfig
    block = ScaledBlock


register_model("test-layerscale", ScaledGPT)


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 9), st.data())
def test_layer_scale_gradients(rt1, B, T, E, data):
    tile = data.draw(st.one_of(st.none(), st.integers(1, E)))
    seed = data.draw(st.integers(0, 2**31))
    x = np.random.default_rng(seed).standard_normal((B, T, E)).astype(np.float32)
    layer = LayerScale(E, tile=tile, init=0.7)
    gradcheck(layer, [x], tiles=[(B, T, tile or E)], seed=seed)          # differences
    require("torch")
    gradcheck(layer, [x], tiles=[(B, T, tile or E)], seed=seed,
              reference=lambda x, p: x * p["weight"])                    # PyTorch


def test_a_block_with_the_new_layer_trains_and_is_planned():
    cfg = ScaledConfig(n_layer=2, n_head=2, n_embd=8, n_positions=8, vocab_size=30,
                       n_inner=12, embd_tile=4, inner_tile=5, batch_tile=1)
    ids = np.random.default_rng(0).integers(0, 30, (2, 9))
    cats = memory.categories(cfg, 2, 8)
    with nl.Runtime(ncpu=2, buffer_cache_mb=0) as rt:
        model = ScaledGPT(cfg, seed=1)
        opt = nl.optim.AdamW(model, lr=3e-2)
        losses = []
        for _ in range(20):
            losses.append(model.forward_backward(ids[:, :-1], ids[:, 1:]))
            opt.step()
        rt.wait()
        assert losses[-1] < losses[0] - 0.5, losses
        assert "h.1.ls_2.weight" in model.state_dict()
        # the planner counted the new layer's parameters and saved input
        assert cats["parameters"] == 4 * model.num_params()
        model.free()
