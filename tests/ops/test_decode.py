"""kv_write and attend (nntile_lab/ops/decode.py) against numpy, over random shapes, tilings,
left pads and positions."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.tolerance import assert_close, dot_ulps


@st.composite
def cache_case(draw):
    """Sizes and tiles of a cache (B, H, P, D), a block of t positions written at
    ``column``, and the left pads of each row."""
    B, H, D = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 6))
    P = draw(st.integers(1, 12))
    t = draw(st.integers(1, P))
    column = draw(st.integers(0, P - t))
    tiles = {"b": draw(st.integers(1, B)), "h": draw(st.integers(1, H)),
             "p": draw(st.integers(1, P)), "t": draw(st.integers(1, t))}
    # pads: a row's pads lie before its first real token (at most column + t − 1 of them)
    pads = [draw(st.integers(0, column + t - 1)) for _ in range(B)]
    return dict(B=B, H=H, D=D, P=P, t=t, column=column, tiles=tiles, pads=pads,
                heads_first=draw(st.booleans()), group=draw(st.integers(1, 3)),
                seed=draw(st.integers(0, 2**32 - 1)))


def _block(case, rng):
    """x as (B, H, t, D) values and the tensor handed to the op (either layout)."""
    B, H, D, t, tl = case["B"], case["H"], case["D"], case["t"], case["tiles"]
    x = rng.standard_normal((B, H, t, D)).astype(np.float32)
    if case["heads_first"]:
        return x, nl.from_numpy(x, (tl["b"], tl["h"], tl["t"], D))
    merged = np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(B, t, H * D))
    return x, nl.from_numpy(merged, (tl["b"], tl["t"], tl["h"] * D))


def _cache(case, rng):
    B, H, P, D, tl = case["B"], case["H"], case["P"], case["D"], case["tiles"]
    c = rng.standard_normal((B, H, P, D)).astype(np.float32)
    return c, nl.from_numpy(c, (tl["b"], tl["h"], tl["p"], D))


@given(cache_case())
def test_kv_write(rt, case):
    rng = np.random.default_rng(case["seed"])
    x, tx = _block(case, rng)
    c, tc = _cache(case, rng)
    col, t = case["column"], case["t"]
    assert nl.ops.kv_write(tx, tc, col, heads_first=case["heads_first"]) is tc
    c[:, :, col:col + t, :] = x
    assert np.array_equal(tc.to_numpy(), c)


def attend_reference(q, k, v, pads, column, scale):
    """Float64 masked attention: q (B, H, t, D) at positions column…, over k, v (B, H/G, P,
    D), query head h reading cache head h // G (grouped-query heads); query q sees keys p
    with min(pads[b], q) ≤ p ≤ q. Returns (y (B, t, H·D), magnitude)."""
    B, H, t, D = q.shape
    P, G = k.shape[2], H // k.shape[1]
    y = np.zeros((B, t, H, D))
    mag = np.zeros((B, t, H, D))
    for b in range(B):
        for i in range(t):
            pos = column + i
            keys = np.arange(P)
            seen = (keys >= min(pads[b], pos)) & (keys <= pos)
            for h in range(H):
                kh, vh = (c[b, h // G, seen].astype(np.float64) for c in (k, v))
                s = scale * (kh @ q[b, h, i].astype(np.float64))
                w = np.exp(s - s.max())
                w /= w.sum()
                y[b, i, h] = w @ vh
                mag[b, i, h] = w @ np.abs(vh)
    return y.reshape(B, t, H * D), mag.reshape(B, t, H * D)


@given(cache_case())
def test_attend(rt, case):
    """Over caches of H heads and queries of G·H heads (grouped-query heads: G query heads
    per key/value head, head tiles G times the cache's)."""
    rng = np.random.default_rng(case["seed"])
    B, H, D, P, tl = case["B"], case["H"], case["D"], case["P"], case["tiles"]
    G = case["group"]
    q, tq = _block(dict(case, H=G * H, tiles=dict(tl, h=G * tl["h"])), rng)
    k, tk = _cache(case, rng)
    v, tv = _cache(case, rng)
    # garbage past the positions a query may see: a kernel reading it would show
    never = np.zeros((B, H, P, D), bool)
    never[:, :, case["column"] + case["t"]:, :] = True
    for c, tc in ((k, tk), (v, tv)):
        c[never] = np.nan
        tc.copy_from_numpy(c)
    pads = np.array(case["pads"], np.int64)
    tp = nl.from_numpy(pads, (tl["b"],))
    y = nl.ops.attend(tq, tk, tv, tp, case["column"], heads_first=case["heads_first"])
    assert y.shape == (B, case["t"], G * H * D)
    assert y.tile_shape == (tl["b"], tl["t"], G * tl["h"] * D)
    want, mag = attend_reference(q, k, v, pads, case["column"], 1 / np.sqrt(D))
    got = y.to_numpy()
    assert np.isfinite(got).all()
    # a score is a D-term dot product: its rounding moves its weight by that much relative,
    # which the output carries at the size of Σ w|v| (mag); then the P-term weighted sum
    smax = D * np.nanmax(np.abs(k)) * np.abs(q).max() / np.sqrt(D)
    assert_close(got, want, mag, ulps=dot_ulps(P) + 4 + 2 * dot_ulps(D) * smax, what=case)


def test_attend_refuses_mismatched_tiles(rt1):
    k = nl.zeros((2, 4, 8, 3), (1, 2, 4, 3))
    q = nl.zeros((2, 1, 12), (1, 1, 3))                 # head tile 1, the cache's is 2
    pads = nl.from_numpy(np.zeros(2, np.int64), (1,))
    with pytest.raises(ValueError, match="head tile 1"):
        nl.ops.attend(q, k, k, pads, 3)
    q = nl.zeros((2, 1, 24), (1, 1, 6))                 # 8 query heads, 2 per cache head
    with pytest.raises(ValueError, match=r"head tile 2, the cache .* asks for \(1, 4\) \(2 "
                                         r"query heads per cache head\)"):
        nl.ops.attend(q, k, k, pads, 3)
    q = nl.zeros((2, 1, 12), (1, 1, 6))
    with pytest.raises(ValueError, match="outside the cache of 8 positions"):
        nl.ops.attend(q, k, k, pads, 8)
    with pytest.raises(ValueError, match="outside the cache"):
        nl.ops.kv_write(q, k, 8)


def test_outputs_that_alias_an_input_are_refused(rt1):
    """kv_write's cache, attend's out and take_position's out may not share tiles with an
    input (the aliasing coverage list of tests/faults/test_aliasing.py points here)."""
    cache = nl.zeros((2, 2, 4, 3), (1, 1, 4, 3))
    with pytest.raises(ValueError, match=r"^kv_write: cache is x"):
        nl.ops.kv_write(cache, cache, 0, heads_first=True)
    q = nl.zeros((2, 1, 6), (1, 1, 3))
    pads = nl.from_numpy(np.zeros(2, np.int64), (1,))
    with pytest.raises(ValueError, match=r"^attend: out is q"):
        nl.ops.attend(q, cache, cache, pads, 0, out=q)
    with pytest.raises(ValueError, match=r"^attend: out shares its tiles with q"):
        nl.ops.attend(q, cache, cache, pads, 0, out=q.split_axis(2, 3).merge_axes(2))
    with pytest.raises(ValueError, match=r"^take_position: out is x"):
        nl.ops.take_position(q, 0, out=q)


@given(st.integers(1, 4), st.integers(1, 9), st.integers(1, 7), st.data())
def test_take_position(rt, B, T, E, data):
    tiles = (data.draw(st.integers(1, B)), data.draw(st.integers(1, T)),
             data.draw(st.integers(1, E)))
    i = data.draw(st.integers(0, T - 1))
    x = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal(
        (B, T, E)).astype(np.float32)
    out = nl.ops.take_position(nl.from_numpy(x, tiles), i)
    assert out.tile_shape == (tiles[0], 1, tiles[2])
    assert np.array_equal(out.to_numpy(), x[:, i:i + 1, :])
