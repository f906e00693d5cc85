import numpy as np
import pytest
from hypothesis import given

import nntile_lab as nl
from nntile_lab.tensor import TensorTraits
from tests.strategies import shape_and_tiles


def test_traits_leftovers():
    t = TensorTraits((10, 7, 1), (4, 7, 1))
    assert t.grid_shape == (3, 1, 1) and t.ntiles == 3
    assert t.tile_shapes == [(4, 7, 1), (4, 7, 1), (2, 7, 1)]
    assert t.tile_offsets == [(0, 0, 0), (4, 0, 0), (8, 0, 0)]
    assert t.tile_sizes == [28, 28, 14]
    assert t.grid_index(2) == (2, 0, 0) and t.index((2, 0, 0)) == 2
    assert TensorTraits((5, 3)).tile_shape == (5, 3)          # default: one tile
    assert TensorTraits((5, 3), (8, 8)).tile_shape == (5, 3)  # capped at the shape


@given(shape_and_tiles(min_ndim=0, max_ndim=4))
def test_tiles_cover_tensor_exactly(st_):
    shape, tiles = st_
    t = TensorTraits(shape, tiles)
    cover = np.zeros(shape, np.int32)
    for i in range(t.ntiles):
        cover[t.tile_slices(i)] += 1
        assert t.grid_index(i) == tuple(o // s for o, s in zip(t.tile_offsets[i], tiles))
    assert (cover == 1).all()


@given(shape_and_tiles(max_ndim=4))
def test_numpy_round_trip(rt, st_):
    shape, tiles = st_
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    tx = nl.from_numpy(x, tiles)
    assert tx.shape == shape and tx.grid_shape == tx.traits.grid_shape
    assert np.array_equal(tx.to_numpy(), x)
    ids = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    assert np.array_equal(nl.from_numpy(ids, tiles).to_numpy(), ids)
    assert np.array_equal(nl.zeros(shape, tiles).to_numpy(), np.zeros(shape, np.float32))
    assert nl.zeros(shape, tiles, dtype=np.int64).to_numpy().dtype == np.int64


@pytest.mark.parametrize("tile, match", [((0, 2), r"tile_shape\[0\] = 0"),
                                         ((2, -3), r"tile_shape\[1\] = -3"),
                                         ((2,), "has 1 dimensions but shape"),
                                         ((2, 2.5), r"tile_shape\[1\] = 2.5")])
def test_bad_tile_shapes(rt1, tile, match):
    with pytest.raises(ValueError, match=match):
        nl.zeros((4, 4), tile)


def test_bad_arrays(rt1):
    with pytest.raises(TypeError, match="dtype float64 is not supported.*astype"):
        nl.from_numpy(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="not C-contiguous.*ascontiguousarray"):
        nl.from_numpy(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="expected a numpy array, got list"):
        nl.from_numpy([1.0, 2.0])
    with pytest.raises(ValueError, match=r"shape\[0\] = 0"):
        nl.zeros((0, 3))
    x = nl.zeros((2, 3))
    with pytest.raises(ValueError, match=r"array of shape \(3, 2\)"):
        x.copy_from_numpy(np.zeros((3, 2), np.float32))


def test_free_is_deterministic_and_idempotent(rt1):
    x = nl.zeros((4,), (2,))
    x.free()
    x.free()
    with pytest.raises(RuntimeError, match="was freed"):
        x.to_numpy()
    with nl.zeros((3,)) as y:
        pass
    assert y._handles is None


def test_split_and_merge_views_share_tiles(rt1):
    x = np.arange(2 * 3 * 12, dtype=np.float32).reshape(2, 3, 12)
    t = nl.from_numpy(x, (1, 2, 8))
    v = t.split_axis(2, 4)
    assert v.shape == (2, 3, 3, 4) and v.tile_shape == (1, 2, 2, 4)
    assert np.array_equal(v.to_numpy(), x.reshape(2, 3, 3, 4))
    back = v.merge_axes(2)
    assert back.traits == t.traits
    nl.ops.fill(v, 1.0)                      # writes through the view
    assert (t.to_numpy() == 1).all()
    v.free()                                 # a view never frees its base's tiles
    assert (t.to_numpy() == 1).all()
    with pytest.raises(ValueError, match="multiples of 5"):
        t.split_axis(2, 5)
    with pytest.raises(TypeError, match=r"inner=\(2, 4\) must be an int"):
        t.split_axis(2, (2, 4))
    with pytest.raises(ValueError, match="inner=0 must be ≥ 1"):
        t.split_axis(2, 0)
    with pytest.raises(ValueError, match="must be one tile"):
        nl.zeros((4, 6), (2, 3)).merge_axes(0)
