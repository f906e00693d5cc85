"""Rotary position embedding in Hugging Face's rotate-half convention, against a float64
reference written as Hugging Face writes it (q·cos + rotate_half(q)·sin, the tables' halves
duplicated), over random shapes, tilings and positions (an offset: generation), and its
backward against PyTorch's autograd of that reference. Every input is drawn from the test's
own seed."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.tolerance import assert_close

U = 2.0**-24


@st.composite
def rope_case(draw):
    """(shape (…, T, D), tile shape with D whole, positions, theta)"""
    lead = [draw(st.integers(1, 4)) for _ in range(draw(st.integers(0, 2)))]
    t, d = draw(st.integers(1, 12)), 2 * draw(st.integers(1, 9))
    shape = (*lead, t, d)
    tiles = tuple(draw(st.integers(1, s)) for s in shape[:-1]) + (d,)
    offset = draw(st.sampled_from([0, 0, 7, 4000]))
    positions = np.arange(offset, offset + t) if draw(st.booleans()) else \
        np.array(draw(st.lists(st.integers(0, 5000), min_size=t, max_size=t)))
    theta = draw(st.sampled_from([10000.0, 500000.0, 3.5]))
    return shape, tiles, positions, theta


def hf_rope(x, positions, theta):
    """Hugging Face's apply_rotary_pos_emb in float64: cos/sin of θ = p·θ_base^(−2d/D),
    duplicated over the two halves, q·cos + rotate_half(q)·sin"""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    freqs = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    rot = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)
    return x * np.cos(emb) + rot * np.sin(emb)


def rotated_magnitude(v, cos, sin):
    """|v|·|cos| + |the other half of v|·|sin| per value: the terms a rotated value sums"""
    h = v.shape[-1] // 2
    v = abs(v.astype(np.float64))
    other = np.concatenate([v[..., h:], v[..., :h]], -1)
    return v * abs(np.concatenate([cos, cos], -1)) + other * abs(np.concatenate([sin, sin], -1))


def tables(positions, d, theta, t_tile):
    cos, sin = nl.ops.rope_tables(positions, d, theta)
    return cos, sin, nl.from_numpy(cos, (t_tile, d // 2)), nl.from_numpy(sin, (t_tile, d // 2))


def test_tables_are_the_angles_rounded_once():
    pos = np.array([0, 1, 5, 4095, 100000])
    cos, sin = nl.ops.rope_tables(pos, 8, 10000.0)
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == (5, 4)
    angle = pos[:, None] * 10000.0 ** (-np.arange(0, 8, 2) / 8)
    assert np.array_equal(cos, np.cos(angle).astype(np.float32))
    assert np.array_equal(sin, np.sin(angle).astype(np.float32))
    assert np.all(cos[0] == 1) and np.all(sin[0] == 0)


@given(rope_case(), st.integers(0, 2**32 - 1), st.booleans())
def test_rope_is_hugging_faces_rotation(rt, case, seed, in_place):
    shape, tiles, positions, theta = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    d = shape[-1]
    cos, sin, tc, ts = tables(positions, d, theta, tiles[-2])
    tx = nl.from_numpy(x, tiles)
    y = nl.ops.rope(tx, tc, ts, out=tx if in_place else None)
    assert (y is tx) == in_place
    # each value is x1·cos ∓ x2·sin: the tables' rounding (one each) and two of its own,
    # relative to |x1·cos| + |x2·sin|
    assert_close(y.to_numpy(), hf_rope(x.astype(np.float64), positions, theta),
                 rotated_magnitude(x, cos, sin), ulps=4, what="rope")


@given(rope_case(), st.integers(0, 2**32 - 1), st.booleans())
def test_rope_backward_vs_torch(rt, case, seed, in_place):
    torch = require("torch")
    shape, tiles, positions, theta = case
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    d = shape[-1]
    cos, sin, tc, ts = tables(positions, d, theta, tiles[-2])
    # the reference on the same float32 tables (the rotation the kernel applies)
    c2, s2 = (torch.tensor(np.concatenate([v, v], -1), dtype=torch.float64) for v in (cos, sin))
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    rot = torch.cat([-xt[..., d // 2:], xt[..., : d // 2]], -1)
    (xt * c2 + rot * s2).backward(torch.tensor(dy, dtype=torch.float64))
    tdy = nl.from_numpy(dy, tiles)
    dx = nl.ops.rope_backward(tdy, tc, ts, dx=tdy if in_place else None)
    assert (dx is tdy) == in_place
    assert_close(dx.to_numpy(), xt.grad.numpy(), rotated_magnitude(dy, cos, sin), ulps=3,
                 what="rope_backward")


def test_a_longer_table_gives_its_first_rows(rt1):
    """A model keeps the tables of positions 0…P−1 and turns a sequence of T ≤ P tokens
    with their first T rows: the same as tables of exactly T rows."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    tiles = (1, 2, 2, 6)
    _, _, tc, ts = tables(np.arange(5), 6, 10000.0, 2)
    _, _, lc, ls = tables(np.arange(11), 6, 10000.0, 2)
    short = nl.ops.rope(nl.from_numpy(x, tiles), tc, ts).to_numpy()
    long = nl.ops.rope(nl.from_numpy(x, tiles), lc, ls).to_numpy()
    assert np.array_equal(short, long)
    back = nl.ops.rope_backward(nl.from_numpy(x, tiles), lc, ls).to_numpy()
    assert np.array_equal(back, nl.ops.rope_backward(nl.from_numpy(x, tiles), tc, ts).to_numpy())


def test_bad_inputs(rt1):
    cos, sin = nl.ops.rope_tables(np.arange(4), 6, 10000.0)
    tc, ts = nl.from_numpy(cos, (2, 3)), nl.from_numpy(sin, (2, 3))
    with pytest.raises(ValueError, match=r"rope: x is .*: its last axis \(a head, 6 values\) "
                                         r"must be whole in each tile \(tile 3\)"):
        nl.ops.rope(nl.zeros((3, 4, 6), (3, 2, 3)), tc, ts)
    with pytest.raises(ValueError, match=r"rope: the head size 5 .* is odd"):
        nl.ops.rope(nl.zeros((4, 5), (2, 5)), tc, ts)
    with pytest.raises(ValueError, match=r"cos is .* the table of x's 4 tokens .* must have "
                                         r"shape \(4, 3\) with tile_shape \(1, 3\)"):
        nl.ops.rope(nl.zeros((2, 4, 6), (2, 1, 6)), tc, ts)
    with pytest.raises(ValueError, match=r"cos is .*shape=\(4, 3\).* the table of x's 5 tokens "
                                         r"\(rope_tables: at least 5 rows\)"):
        nl.ops.rope(nl.zeros((5, 6), (2, 6)), tc, ts)
    with pytest.raises(ValueError, match=r"dx is .* dx \(like dy .* must have shape \(4, 6\)"):
        nl.ops.rope_backward(nl.zeros((4, 6), (2, 6)), tc, ts, dx=tc)
    with pytest.raises(ValueError, match=r"rope_theta=0.0 must be a finite number > 0"):
        nl.ops.rope_tables(np.arange(3), 6, 0.0)
    with pytest.raises(ValueError, match=r"rope_theta=nan must be"):
        nl.ops.rope_tables(np.arange(3), 6, float("nan"))
    with pytest.raises(ValueError, match=r"head_size=7: rotary positions turn pairs"):
        nl.ops.rope_tables(np.arange(3), 7, 10000.0)
    with pytest.raises(ValueError, match=r"positions must be a 1-D array of integers ≥ 0"):
        nl.ops.rope_tables(np.array([0, -1]), 6, 10000.0)
    with pytest.raises(ValueError, match=r"positions must be a 1-D array of integers ≥ 0"):
        nl.ops.rope_tables(np.array([0.5]), 6, 10000.0)
