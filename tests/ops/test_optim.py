import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.ops.two_workers import OPTIMIZER_ULPS
from tests.strategies import seeds, shape_and_tiles
from tests.tolerance import assert_close

torch = require("torch")
STEPS = 4
SEEDS = seeds()


def rand(shape, rng):
    return rng.standard_normal(shape).astype(np.float32)


def torch_param(p):
    return torch.nn.Parameter(torch.tensor(p, dtype=torch.float64))


@given(shape_and_tiles(), st.sampled_from([0.0, 0.1]), st.booleans(),
       st.sampled_from([(0.9, 0.999), (0.8, 0.99), (0.0, 0.5)]), SEEDS)
def test_adamw_vs_torch(rt, st_, weight_decay, decoupled, betas, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    p0 = rand(shape, rng)
    kw = dict(lr=0.05, betas=betas, eps=1e-6, weight_decay=weight_decay)
    w = torch_param(p0)
    opt = (torch.optim.AdamW if decoupled else torch.optim.Adam)([w], **kw)
    p, m, v = nl.from_numpy(p0, tiles), nl.zeros(shape, tiles), nl.zeros(shape, tiles)
    # p_T = p_0 − Σ Δ_k and m_T = Σ c_k·g_k may cancel to far below their terms, where
    # float32 rounding of the terms is all a relative error would see: measure against them
    p_terms, g_terms = np.abs(p0).astype(np.float64), np.zeros(shape)
    for step in range(1, STEPS + 1):
        g = rand(shape, rng)
        w.grad = torch.tensor(g, dtype=torch.float64)
        before = w.detach().numpy().copy()
        opt.step()
        p_terms += np.abs(w.detach().numpy() - before)
        g_terms += np.abs(g)
        nl.ops.adamw(p, nl.from_numpy(g, tiles), m, v, step=step, lr=kw["lr"],
                     beta1=betas[0], beta2=betas[1], eps=kw["eps"],
                     weight_decay=weight_decay, decoupled=decoupled)
    state = opt.state[w]
    ulps = STEPS * OPTIMIZER_ULPS["adamw"]   # each step's roundings, carried by the next
    assert_close(p.to_numpy(), w.detach().numpy(), p_terms, ulps=ulps, what="p")
    assert_close(m.to_numpy(), state["exp_avg"].numpy(), g_terms, ulps=ulps, what="m")
    assert_close(v.to_numpy(), state["exp_avg_sq"].numpy(), ulps=ulps, what="v")  # Σ of squares


def test_adamw_fresh_moments_read_as_zeros(rt1):
    """m and v never written (nl.empty) start at zero, like torch's state."""
    rng = np.random.default_rng(0)
    p0, g = rand((5, 3), rng), rand((5, 3), rng)
    w = torch_param(p0)
    w.grad = torch.tensor(g, dtype=torch.float64)
    torch.optim.AdamW([w], lr=0.1, weight_decay=0.01).step()
    p = nl.from_numpy(p0, (2, 2))
    nl.ops.adamw(p, nl.from_numpy(g, (2, 2)), nl.empty((5, 3), (2, 2)),
                 nl.empty((5, 3), (2, 2)), step=1, lr=0.1, weight_decay=0.01)
    # (a step's roundings, relative to |p| + lr: the update m/√v is ±1 at step 1)
    assert_close(p.to_numpy(), w.detach().numpy(), abs(p0) + 0.1,
                 ulps=OPTIMIZER_ULPS["adamw"], what="p")


@given(shape_and_tiles(), st.sampled_from([0.0, 0.9]), st.sampled_from([0.0, 0.01]),
       st.sampled_from([0.0, 0.3]), st.booleans(), SEEDS)
def test_sgd_vs_torch(rt, st_, momentum, weight_decay, dampening, nesterov, seed):
    shape, tiles = st_
    rng = np.random.default_rng(seed)
    nesterov = nesterov and momentum > 0
    dampening = 0.0 if nesterov else dampening
    p0 = rand(shape, rng)
    kw = dict(lr=0.1, momentum=momentum, weight_decay=weight_decay, dampening=dampening,
              nesterov=nesterov)
    w = torch_param(p0)
    opt = torch.optim.SGD([w], **kw)
    p = nl.from_numpy(p0, tiles)
    buf = nl.empty(shape, tiles) if momentum else None
    p_terms, g_terms = np.abs(p0).astype(np.float64), np.zeros(shape)   # as for AdamW
    for step in range(STEPS):
        g = rand(shape, rng)
        w.grad = torch.tensor(g, dtype=torch.float64)
        before = w.detach().numpy().copy()
        opt.step()
        p_terms += np.abs(w.detach().numpy() - before)
        g_terms += np.abs(g) + weight_decay * np.abs(before)
        nl.ops.sgd(p, nl.from_numpy(g, tiles), buf, first=step == 0, **kw)
    ulps = STEPS * OPTIMIZER_ULPS["sgd"]
    assert_close(p.to_numpy(), w.detach().numpy(), p_terms, ulps=ulps, what="p")
    if momentum:
        assert_close(buf.to_numpy(), opt.state[w]["momentum_buffer"].numpy(), g_terms,
                     ulps=ulps, what="buf")


def test_bad_inputs_raise_clear_errors(rt1):
    p, g = nl.zeros((4, 4), (2, 2)), nl.zeros((4, 4), (2, 2))
    m, v = nl.zeros((4, 4), (2, 2)), nl.zeros((4, 4), (2, 2))
    for step in (0, -1, 1.0, True):
        with pytest.raises(ValueError, match=rf"step={step!r} must be an integer ≥ 1"):
            nl.ops.adamw(p, g, m, v, step=step, lr=0.1)
    with pytest.raises(ValueError, match="beta2=1.0 must be in"):
        nl.ops.adamw(p, g, m, v, step=1, lr=0.1, beta2=1.0)
    with pytest.raises(ValueError, match="shapes/tiles differ"):
        nl.ops.adamw(p, g, m, nl.zeros((4, 4), (4, 2)), step=1, lr=0.1)
    with pytest.raises(TypeError, match="g must be float32, got int64"):
        nl.ops.adamw(p, nl.zeros((4, 4), (2, 2), np.int64), m, v, step=1, lr=0.1)
    with pytest.raises(ValueError, match="momentum=0.9 needs a momentum buffer"):
        nl.ops.sgd(p, g, None, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="nesterov needs momentum > 0 and dampening = 0"):
        nl.ops.sgd(p, g, m, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="shapes/tiles differ"):
        nl.ops.sgd(p, nl.zeros((4, 4), (1, 4)), None, lr=0.1)
    # the runtime keeps working
    nl.ops.sgd(p, nl.full((4, 4), 1.0, (2, 2)), None, lr=0.5)
    assert np.array_equal(p.to_numpy(), np.full((4, 4), -0.5, np.float32))
