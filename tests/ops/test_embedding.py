import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.conftest import require
from tests.strategies import seeds, shape_and_tiles, tile_for
from tests.tolerance import assert_close


@st.composite
def lookup_case(draw):
    """Token shape/tiles, vocabulary V/vt (often split) and embedding E/et."""
    shape, tiles = draw(shape_and_tiles(max_ndim=2, max_dim=9))
    vocab, emb = draw(st.integers(1, 13)), draw(st.integers(1, 9))
    return shape, tiles, vocab, tile_for(draw, vocab), emb, tile_for(draw, emb)


def tensors(rng, case):
    shape, tiles, vocab, vt, emb, et = case
    ids = rng.integers(0, vocab, shape)
    table = rng.standard_normal((vocab, emb)).astype(np.float32)
    return ids, table, nl.from_numpy(ids, tiles), nl.from_numpy(table, (vt, et))


@given(lookup_case(), seeds())
def test_embedding_forward(rt, case, seed):
    ids, table, tids, ttable = tensors(np.random.default_rng(seed), case)
    out = nl.ops.embedding(tids, ttable)
    assert out.tile_shape == tids.tile_shape + (ttable.tile_shape[1],)
    assert np.array_equal(out.to_numpy(), table[ids])
    # into an existing out: every row is overwritten
    again = nl.full(out.shape, 7.0, out.tile_shape)
    assert nl.ops.embedding(tids, ttable, again) is again
    assert np.array_equal(again.to_numpy(), table[ids])


@given(lookup_case(), seeds())
def test_embedding_backward_vs_torch(rt, case, seed):
    torch = require("torch")
    rng = np.random.default_rng(seed)
    ids, table, tids, ttable = tensors(rng, case)
    dout = rng.standard_normal(ids.shape + table.shape[1:]).astype(np.float32)
    tdout = nl.from_numpy(dout, tids.tile_shape + (ttable.tile_shape[1],))
    w = torch.tensor(table, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(ids), w).backward(
        torch.tensor(dout, dtype=torch.float64))
    prior = rng.standard_normal(table.shape).astype(np.float32)
    dtable = nl.from_numpy(prior, ttable.tile_shape)
    assert nl.ops.embedding_backward(tids, tdout, dtable) is dtable
    # accumulates: a row adds one float32 rounding per token with its id
    mag = abs(prior).astype(np.float64)
    np.add.at(mag, ids.reshape(-1), abs(dout.reshape(-1, dout.shape[-1])))
    assert_close(dtable.to_numpy(), prior + w.grad.numpy(), mag, ulps=ids.size + 1, what=case)


@pytest.mark.parametrize("bad", [10, 12, -1])
def test_out_of_range_id_is_a_task_error(rt1, bad):
    table = nl.from_numpy(np.ones((10, 4), np.float32), (3, 2))
    ids = nl.from_numpy(np.array([[1, bad, 3], [0, 9, 2]]), (1, 2))
    with pytest.raises(nl.TaskError, match=rf"token id {bad} .*vocabulary of 10 tokens"):
        nl.ops.embedding(ids, table).to_numpy()
    dtable = nl.zeros((10, 4), (3, 2))
    with pytest.raises(nl.TaskError, match=rf"embedding_backward: token id {bad}\b"):
        nl.ops.embedding_backward(ids, nl.zeros((2, 3, 4), (1, 2, 2)), dtable)
        rt1.wait()
    # the runtime keeps working
    good = nl.from_numpy(np.array([9, 0]), (1,))
    assert np.array_equal(nl.ops.embedding(good, table).to_numpy(), np.ones((2, 4)))


def test_bad_inputs_raise_clear_errors(rt1):
    table = nl.zeros((10, 4), (5, 2))
    ids = nl.from_numpy(np.array([1, 2, 3]), (2,))
    with pytest.raises(TypeError, match="ids must be int64, got float32"):
        nl.ops.embedding(nl.zeros((3,)), table)
    with pytest.raises(TypeError, match="table must be float32, got int64"):
        nl.ops.embedding(ids, nl.zeros((10, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="table must be 2-D"):
        nl.ops.embedding(ids, nl.zeros((10, 4, 1)))
    with pytest.raises(TypeError, match="dtable must be float32, got int64"):
        nl.ops.embedding_backward(ids, nl.zeros((3, 4)), nl.zeros((10, 4), dtype=np.int64))
    with pytest.raises(ValueError, match=r"need shape \(3, 4\) with tile_shape \(2, 2\)"):
        nl.ops.embedding(ids, table, nl.zeros((3, 4), (3, 2)))
    with pytest.raises(ValueError, match=r"dout is .* need shape \(3, 4\)"):
        nl.ops.embedding_backward(ids, nl.zeros((3, 5), (2, 2)), table)
    with pytest.raises(ValueError, match="accumulates into dtable"):
        nl.ops.embedding_backward(ids, nl.zeros((3, 4), (2, 2)), None)
