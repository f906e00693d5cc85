"""SwiGLU's gate, fused: y = silu(g)·u and its two gradients, against float64 references over
random shapes and tilings (PyTorch's autograd for the gradients), in place and accumulating.
Every input is drawn from the test's own seed."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.strategies import seeds, shape_and_tiles
from tests.tolerance import assert_close

SEEDS = seeds()
# σ from the kernels' exp (≤ 1.5 ulp) and a division, then up to four products and a sum:
# within ~10 float32 roundings of the terms' magnitude
ULPS = 10


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x.astype(np.float64)))


def draw_inputs(seed, shape, n=3):
    rng = np.random.default_rng(seed)
    out = [(rng.standard_normal(shape) * 4).astype(np.float32)]
    return out + [rng.standard_normal(shape).astype(np.float32) for _ in range(n - 1)]


@given(shape_and_tiles(), SEEDS, st.sampled_from([None, "g", "u"]))
def test_silu_gate(rt, st_, seed, in_place):
    shape, tiles = st_
    g, u = draw_inputs(seed, shape, 2)
    tg, tu = nl.from_numpy(g, tiles), nl.from_numpy(u, tiles)
    out = {None: None, "g": tg, "u": tu}[in_place]
    y = nl.ops.silu_gate(tg, tu, out=out)
    assert out is None or y is out
    want = g * sigmoid(g) * u
    assert_close(y.to_numpy(), want, ulps=ULPS, what="silu_gate")


@given(shape_and_tiles(), SEEDS, st.sampled_from([0.0, 1.0, -0.5]),
       st.sampled_from([None, "given", "inputs"]))
def test_silu_gate_backward_vs_torch(rt, st_, seed, beta, where):
    torch = require("torch")
    shape, tiles = st_
    g, u, dy, dg0, du0 = draw_inputs(seed, shape, 5)
    gt, ut = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (g, u))
    (torch.nn.functional.silu(gt) * ut).backward(torch.tensor(dy, dtype=torch.float64))
    tg, tu, tdy = (nl.from_numpy(v, tiles) for v in (g, u, dy))
    if where is None:
        beta = 0.0
        start = {}
    elif where == "given":
        start = {"dg": nl.from_numpy(dg0, tiles), "du": nl.from_numpy(du0, tiles)}
    else:                                # the gradients over the inputs they come from
        start = {"dg": tg, "du": tu}
        dg0, du0 = g, u
    dg, du = nl.ops.silu_gate_backward(tg, tu, tdy, **start, beta=beta)
    if start:
        assert dg is start["dg"] and du is start["du"]
    s = sigmoid(g)
    # silu'(g) = σ·(1 + g·(1 − σ)) cancels near g ≈ −1.28: errors relative to the terms
    mag = {"dg": abs(dy * u) * s * (1 + abs(g) * (1 - s)), "du": abs(dy * g) * s}
    base = {"dg": np.float32(beta) * dg0, "du": np.float32(beta) * du0} if start else \
        {"dg": 0, "du": 0}
    for name, got, want in (("dg", dg, gt.grad), ("du", du, ut.grad)):
        assert_close(got.to_numpy(), want.numpy() + base[name], mag[name] + abs(base[name]),
                     ulps=ULPS, what=name)


@given(shape_and_tiles(), SEEDS, st.sampled_from([0.0, 0.5]))
def test_the_bf16_variants_are_the_float32_ops_on_bf16_values(rt, st_, seed, beta):
    """silu_gate_bf16 keeps bf16(g), bf16(u) (bit for bit as to_bf16) and writes
    bf16(silu_gate(g, u)); silu_gate_backward_bf16 on those is silu_gate_backward on their
    widened values, exactly (the same float32 formula after an exact widening)."""
    shape, tiles = st_
    g, u, dy, dg0, du0 = draw_inputs(seed, shape, 5)
    tg, tu, tdy = (nl.from_numpy(v, tiles) for v in (g, u, dy))
    gk, uk, y = nl.ops.silu_gate_bf16(tg, tu)
    for got, want in ((gk, nl.ops.to_bf16(tg)), (uk, nl.ops.to_bf16(tu)),
                      (y, nl.ops.to_bf16(nl.ops.silu_gate(tg, tu)))):
        assert got.dtype == want.dtype and np.array_equal(got.to_numpy().view(np.uint16),
                                                          want.to_numpy().view(np.uint16))
    start = {}
    if beta:
        start = {"dg": nl.from_numpy(dg0, tiles), "du": nl.from_numpy(du0, tiles)}
    dg, du = nl.ops.silu_gate_backward_bf16(gk, uk, tdy, **start, beta=beta)
    ref = {}
    if beta:
        ref = {"dg": nl.from_numpy(dg0, tiles), "du": nl.from_numpy(du0, tiles)}
    wg, wu = nl.ops.silu_gate_backward(nl.ops.to_f32(gk), nl.ops.to_f32(uk), tdy, **ref,
                                       beta=beta)
    assert np.array_equal(dg.to_numpy(), wg.to_numpy())
    assert np.array_equal(du.to_numpy(), wu.to_numpy())


def test_tails_and_nan(rt1):
    """exp under- or overflows far out: finite where the function is; NaN stays NaN."""
    g = np.float32([-1e4, -200, -88, -20, -1e-30, 0, 20, 88, 200, 1e4, np.nan])
    u = np.float32(np.linspace(-2, 2, g.size))
    tg, tu = nl.from_numpy(g, (4,)), nl.from_numpy(u, (4,))
    y = nl.ops.silu_gate(tg, tu).to_numpy()
    ones = nl.full((g.size,), 1.0, (4,))
    dg, du = (t.to_numpy() for t in nl.ops.silu_gate_backward(tg, tu, ones))
    ok = ~np.isnan(g)
    s = sigmoid(g)
    assert np.isnan(y[-1]) and np.isnan(dg[-1]) and np.isnan(du[-1])
    # exp flushes below float32's normal range: absolute error ≤ |g|·1e-38 there
    assert_close(y[ok], (g * s * u)[ok], ulps=ULPS, floor=1e-30, what="y")
    assert_close(du[ok], (g * s)[ok], ulps=ULPS, floor=1e-30, what="du")
    assert_close(dg[ok], (u * s * (1 + g * (1 - s)))[ok],
                 abs(u * s * (1 + abs(g) * (1 - s)))[ok], ulps=ULPS, floor=1e-30, what="dg")


def test_bad_inputs(rt1):
    g, u = nl.zeros((4, 6), (2, 3)), nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"silu_gate_backward: shapes/tiles differ"):
        nl.ops.silu_gate_backward(g, nl.zeros((4, 6), (4, 3)), u)
    with pytest.raises(ValueError, match=r"beta=1.0 accumulates into existing gradients"):
        nl.ops.silu_gate_backward(g, u, u, beta=1.0)
    with pytest.raises(ValueError, match=r"give both dg and du, or neither"):
        nl.ops.silu_gate_backward(g, u, u, dg=nl.zeros((4, 6), (2, 3)))
    d = nl.zeros((4, 6), (2, 3))
    with pytest.raises(ValueError, match=r"silu_gate_backward: dg is du"):
        nl.ops.silu_gate_backward(g, u, u, dg=d, du=d)
    with pytest.raises(TypeError, match=r"silu_gate_backward: g must be float32, got int64"):
        nl.ops.silu_gate_backward(nl.from_numpy(np.zeros((4, 6), np.int64), (2, 3)), u, u)
