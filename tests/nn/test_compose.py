"""Composing layers: mismatched shapes and tiles refused when the model is built, naming
both layers; a layer without a backward refused by a training step before any task; a
value spent by an in-place residual add refused with the fix; an untied head and a value
feeding two branches train like their PyTorch twins (tests/nn/test_gradcheck.py)."""
from dataclasses import dataclass

import numpy as np
import pytest

from nntile_lab import nn
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.policy import StepPolicy
from nntile_lab.trace import Trace
from tests.nn.variants import VariantGPT

SMALL = dict(n_layer=1, n_head=2, n_embd=8, n_positions=8, vocab_size=30, n_inner=12)


@dataclass
class _Config(GPT2Config):
    pass


def _model(block_cls):
    class Model(VariantGPT):
        config_class = _Config
        block = block_cls
    return Model


class WrongTile(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.fc = nn.Linear(c.n_embd, c.n_embd, in_tile=4, out_tile=c.embd_tile)

    def forward(self, x):
        return x + self.fc(self.ln(x))


class WrongWidth(WrongTile):
    def __init__(self, c):
        super().__init__(c)
        self.fc = nn.Linear(c.n_embd, c.n_embd + 1, in_tile=c.embd_tile)


class Frozen(nn.Layer):
    """A layer with a forward only (y = 2x)."""

    def forward(self, ctx, x):
        return nn.backend.ops.scale(x, 2.0), None


class FrozenBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f = Frozen()

    def forward(self, x):
        return self.f(x)


class ReusesSpent(WrongTile):
    def __init__(self, c):
        nn.Module.__init__(self)
        self.ln = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.fc = nn.Linear(c.n_embd, c.n_embd, in_tile=c.embd_tile, out_tile=c.embd_tile)

    def forward(self, x):
        h = self.fc(self.ln(x))
        y = x + h            # writes into h's tensor: h is spent
        return y + self.fc(h)


def test_mismatched_tiles_and_sizes_are_refused_at_build(rt1):
    rt1.wait()
    before = rt1.memory_used(0)
    with pytest.raises(nn.ShapeError, match=r"h\.0\.fc takes inputs of size 8 in tiles of "
                                            r"4 .*got size 8 in tiles of 8 "
                                            r"\(input 0 from h\.0\.ln\)"):
        _model(WrongTile)(_Config(**SMALL, embd_tile=8))
    with pytest.raises(nn.ShapeError, match=r"cannot add the output of .*wpe.* to that of "
                                            r"h\.0\.fc \(shape \(1, 8, 9\)"):
        _model(WrongWidth)(_Config(**SMALL))
    rt1.wait()
    assert rt1.memory_used(0) == before   # refused by the shape-only forward, before any tile


def test_a_layer_without_backward_trains_nothing_and_submits_nothing(rt1):
    model = _model(FrozenBlock)(_Config(**SMALL), seed=1)
    ids = np.zeros((2, 8), np.int64)
    tr = Trace(rt1).start()
    with pytest.raises(TypeError, match=r"cannot train: h\.0\.f has no backward"):
        model.forward_backward(ids, ids)
    tr.stop()
    assert len(tr.tasks) == 0
    assert np.isfinite(model.loss(ids, ids))   # a forward without a backward is fine
    model.free()


def test_a_spent_value_says_so(rt1):
    with pytest.raises(nn.SpentValue, match=r"the output of h\.0\.fc was overwritten in place "
                                            r"by the residual add after h\.0\.fc.*inplace=False"):
        _model(ReusesSpent)(_Config(**SMALL))


def test_outside_a_step_a_layer_says_where_it_runs():
    with pytest.raises(RuntimeError, match="called outside a step"):
        nn.GELU()(None)


class Interrupted(nn.GELU):
    """GELU that raises KeyboardInterrupt once, in its forward or its backward: Ctrl-C
    landing at that moment of a step."""
    when: str | None = None

    def forward(self, ctx, x):
        if Interrupted.when == "forward":
            Interrupted.when = None
            raise KeyboardInterrupt
        return super().forward(ctx, x)

    def backward(self, ctx, saved, dy, dx=None):
        if Interrupted.when == "backward":
            Interrupted.when = None
            raise KeyboardInterrupt
        return super().backward(ctx, saved, dy, dx)


class InterruptedBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln = nn.LayerNorm(c.n_embd, tile=c.embd_tile)
        self.act = Interrupted()

    def forward(self, x):
        return x + self.act(self.ln(x))


def _interrupt_between_stages(monkeypatch):
    """Ctrl-C after a stage's scope closed and before the next one opened (CI saw it)."""
    enter, calls = StepPolicy._enter, []

    def interrupted(self, region, phase):
        calls.append(phase)
        if len(calls) == 2:
            Interrupted.when = None
            raise KeyboardInterrupt
        return enter(self, region, phase)
    monkeypatch.setattr(StepPolicy, "_enter", interrupted)


@pytest.mark.parametrize("when", ["forward", "backward", "between stages"])
def test_an_interrupt_mid_step_propagates_and_the_next_step_is_exact(rt1, when, monkeypatch):
    """Ctrl-C inside a stage or between two reaches the caller as KeyboardInterrupt (not a
    bookkeeping error), the runtime's task scope is the caller's again, and the next step
    equals the same step on a model that was never interrupted."""
    config = _Config(**{**SMALL, "n_layer": 2})
    ids = np.random.default_rng(3).integers(0, SMALL["vocab_size"], (2, 8))
    model, twin = (_model(InterruptedBlock)(config, seed=1) for _ in range(2))
    scope = rt1._scope
    Interrupted.when = when
    with monkeypatch.context() as patch:
        if when == "between stages":
            _interrupt_between_stages(patch)
        with pytest.raises(KeyboardInterrupt):
            model.forward_backward(ids, ids)
    assert Interrupted.when is None and rt1._scope == scope
    loss, want = model.forward_backward(ids, ids), twin.forward_backward(ids, ids)
    assert loss == want
    for name, g in model.grads.items():
        np.testing.assert_array_equal(g.to_numpy(), twin.grads[name].to_numpy(), err_msg=name)
    model.free()
    twin.free()
