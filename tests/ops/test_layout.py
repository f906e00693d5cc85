import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab.ops import layout
from tests.strategies import seeds, shape_and_tiles, tile_for


def rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@st.composite
def mask_case(draw):
    """Leading axes (0 to 2) and a square (T, T) pair, each tiled independently."""
    lead, lead_tiles = draw(shape_and_tiles(min_ndim=0, max_ndim=2, max_dim=4))
    t = draw(st.integers(1, 13))
    return lead + (t, t), lead_tiles + (tile_for(draw, t), tile_for(draw, t))


class CountingLib:
    """Forwards to the real lib, counting mask_causal submissions."""

    def __init__(self, lib):
        self.lib, self.calls = lib, 0

    def nl_submit_mask_causal(self, *args):
        self.calls += 1
        return self.lib.nl_submit_mask_causal(*args)


@given(mask_case(), st.sampled_from([float("-inf"), -1e4, 2.5]), seeds())
def test_mask_causal(rt, case, value, seed):
    shape, tiles = case
    x = rand(np.random.default_rng(seed), shape)
    tx = nl.from_numpy(x, tiles)
    assert nl.ops.mask_causal(tx, value) is tx
    t = shape[-1]
    want = np.where(np.triu(np.ones((t, t), bool), 1), np.float32(value), x)
    assert np.array_equal(tx.to_numpy(), want)


def test_mask_causal_skips_tiles_below_the_diagonal(rt1, monkeypatch):
    counting = CountingLib(layout.lib)
    monkeypatch.setattr(layout, "lib", counting)
    # 4×4 grid of 3×3 tiles on a 12×12 matrix: only the 10 tiles touching or above
    # the diagonal hold columns beyond some row
    x = nl.zeros((2, 12, 12), (1, 3, 3))
    nl.ops.mask_causal(x)
    assert counting.calls == 2 * 10
    assert np.array_equal(np.isinf(x.to_numpy()[1]), np.triu(np.ones((12, 12), bool), 1))


@st.composite
def permute_case(draw):
    ndim = draw(st.integers(1, 6))
    shape, tiles = draw(shape_and_tiles(min_ndim=ndim, max_ndim=ndim,
                                        max_dim=max(2, 13 // ndim)))
    return shape, tiles, tuple(draw(st.permutations(range(ndim))))


@given(permute_case(), seeds())
def test_permute(rt, case, seed):
    shape, tiles, perm = case
    x = rand(np.random.default_rng(seed), shape)
    got = nl.ops.permute(nl.from_numpy(x, tiles), perm)
    assert got.tile_shape == tuple(tiles[d] for d in perm)
    assert np.array_equal(got.to_numpy(), np.transpose(x, perm))


def test_permute_into_out_and_back(rt1):
    x = rand(np.random.default_rng(0), (3, 5, 4))
    tx = nl.from_numpy(x, (2, 3, 4))
    out = nl.empty((4, 3, 5), (4, 2, 3))
    assert nl.ops.permute(tx, (2, 0, 1), out) is out
    back = nl.ops.permute(out, (1, 2, 0))
    assert back.traits == tx.traits
    assert np.array_equal(back.to_numpy(), x)


def test_bad_inputs_raise_clear_errors(rt1):
    with pytest.raises(ValueError, match="the last two equal"):
        nl.ops.mask_causal(nl.zeros((3, 4)))
    with pytest.raises(ValueError, match="≥ 2 axes"):
        nl.ops.mask_causal(nl.zeros((3,)))
    with pytest.raises(TypeError, match="x must be float32, got int64"):
        nl.ops.mask_causal(nl.zeros((3, 3), dtype=np.int64))
    x = nl.zeros((2, 3, 4), (1, 2, 2))
    for perm in ((0, 1), (0, 1, 1), (0, 1, 3)):
        with pytest.raises(ValueError, match=r"must be a permutation of 0\.\.2"):
            nl.ops.permute(x, perm)
    with pytest.raises(ValueError, match=r"needs shape \(4, 2, 3\) with tile_shape \(2, 1, 2\)"):
        nl.ops.permute(x, (2, 0, 1), nl.zeros((4, 2, 3)))
    with pytest.raises(ValueError, match="up to 6 axes, x has 7"):
        nl.ops.permute(nl.zeros((1,) * 7), range(7))
    # the runtime keeps working
    assert np.array_equal(nl.ops.permute(nl.full((2, 3), 1.0, (1, 2)), (1, 0)).to_numpy(),
                          np.ones((3, 2)))
