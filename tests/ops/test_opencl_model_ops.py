"""The OpenCL worker's model ops (issue 18): embedding and its backward, cross-entropy
(stats, merge, loss, gradient), the causal mask, permute and the bf16 conversions, each
forced onto the device with ``Runtime.on("opencl")`` and compared with the CPU and with
NumPy / float64 references, over random shapes and tilings. No OpenCL device fails these
tests loudly: they never skip."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab._lib import ffi, lib
from tests.ops.test_loss import check_loss, loss_ulps, reference
from tests.strategies import seeds, shape_and_tiles, tile_for
from tests.tolerance import assert_close

ROWS = [ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]
MODEL_ROWS = ("embedding", "embedding_backward", "cross_entropy_stats", "cross_entropy_merge",
              "cross_entropy_loss", "cross_entropy_backward", "mask_causal", "permute",
              "f32_to_bf16", "bf16_to_f32")


def test_the_table_gives_opencl_to_the_model_ops():
    assert [r for r in MODEL_ROWS if not lib.nl_op_has_opencl(ROWS.index(r))] == []


def _on_both(rt, make, run, written=lambda t, i: True):
    """``run(*make())`` forced onto the CPU, then onto the OpenCL worker (fresh tensors
    from ``make`` each time): the tensors it returns, as numpy, for each. On the device,
    the output tiles that tasks wrote (``written(tensor, tile)``) must be in the device's
    memory (nothing but the tasks would put them there)."""
    out = {}
    for kind in ("cpu", "opencl"):
        tensors = make()
        with rt.on(kind):
            got = run(*tensors)
            rt.wait()
        if kind == "opencl":
            node = rt.opencl_memory_node()
            assert all(lib.starpu_data_is_on_node(t.handles[i], node)
                       for t in got for i in range(t.ntiles) if written(t, i))
        out[kind] = [t.to_numpy() for t in got]
    return out["cpu"], out["opencl"]


# ---- embedding -------------------------------------------------------------------------

@st.composite
def lookup_case(draw):
    """Token shape/tiles; a vocabulary V/vt, often split, and often far smaller than the
    tokens (so ids repeat, within a token tile and across them); embedding E/et."""
    shape, tiles = draw(shape_and_tiles(max_ndim=2, max_dim=11))
    vocab, emb = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    same = draw(st.booleans())     # every token the same id: the worst case for updates
    return shape, tiles, vocab, tile_for(draw, vocab), emb, tile_for(draw, emb), same


def _ids(rng, case):
    shape, _, vocab, _, _, _, same = case
    return (np.full(shape, rng.integers(0, vocab)) if same
            else rng.integers(0, vocab, shape)).astype(np.int64)


@given(lookup_case(), seeds())
def test_embedding_on_opencl_matches_numpy(ocl, case, seed):
    shape, tiles, vocab, vt, emb, et, _ = case
    rng = np.random.default_rng(seed)
    ids, table = _ids(rng, case), rng.standard_normal((vocab, emb)).astype(np.float32)
    # into an existing out full of NaN: every row overwritten, whatever the vocab tiling
    cpu, dev = _on_both(
        ocl, lambda: (nl.from_numpy(ids, tiles), nl.from_numpy(table, (vt, et)),
                      nl.full(shape + (emb,), np.nan, tiles + (et,))),
        lambda i, t, o: [nl.ops.embedding(i, t, o)])
    assert np.array_equal(dev[0], table[ids]) and np.array_equal(cpu[0], dev[0])


@given(lookup_case(), seeds())
def test_embedding_backward_on_opencl_loses_no_update(ocl, case, seed):
    """Repeated ids add every token's row: the float64 scatter-add within float32
    rounding, and bit for bit the CPU's (the device adds in the CPU's order)."""
    shape, tiles, vocab, vt, emb, et, _ = case
    rng = np.random.default_rng(seed)
    ids = _ids(rng, case)
    dout = rng.standard_normal(shape + (emb,)).astype(np.float32)
    prior = rng.standard_normal((vocab, emb)).astype(np.float32)
    cpu, dev = _on_both(
        ocl, lambda: (nl.from_numpy(ids, tiles), nl.from_numpy(dout, tiles + (et,)),
                      nl.from_numpy(prior, (vt, et))),
        lambda i, d, t: [nl.ops.embedding_backward(i, d, t)])
    want = prior.astype(np.float64)
    np.add.at(want, ids.reshape(-1), dout.reshape(-1, emb).astype(np.float64))
    magnitude = np.abs(prior).astype(np.float64)
    np.add.at(magnitude, ids.reshape(-1), np.abs(dout.reshape(-1, emb)).astype(np.float64))
    # n float32 additions into one row: each rounds by ≤ 2^-24 of the running magnitude
    assert_close(dev[0], want, magnitude, ulps=ids.size + 1, what=case)
    assert np.array_equal(dev[0], cpu[0])


@pytest.mark.parametrize("bad", [10, -1])
def test_an_out_of_range_id_on_opencl_is_the_cpu_error(ocl, bad):
    table = nl.from_numpy(np.ones((10, 4), np.float32), (3, 2))
    ids = nl.from_numpy(np.array([[1, bad, 3], [0, 9, 2]]), (1, 2))
    with ocl.on("opencl"):
        with pytest.raises(nl.TaskError, match=rf"embedding: token id {bad} .*vocabulary of 10"):
            nl.ops.embedding(ids, table).to_numpy()
        dtable = nl.zeros((10, 4), (3, 2))
        with pytest.raises(nl.TaskError,
                           match=rf"embedding_backward: token id {bad} .*vocabulary of 10"):
            nl.ops.embedding_backward(ids, nl.full((2, 3, 4), 1.0, (1, 2, 2)), dtable).to_numpy()
        good = nl.from_numpy(np.array([[1, 5, 3], [0, 9, 2]]), (1, 2))
        assert np.array_equal(nl.ops.embedding(good, table).to_numpy(), np.ones((2, 3, 4)))


# ---- cross-entropy ---------------------------------------------------------------------

@st.composite
def loss_case(draw):
    """Token shape/tiles and a vocabulary V, often split into several tiles."""
    shape, tiles = draw(shape_and_tiles(max_ndim=2, max_dim=6))
    vocab = draw(st.integers(1, 24))
    return shape, tiles, vocab, tile_for(draw, vocab)


def _cross_entropy(logits, labels, grad_scale):
    loss, d = nl.ops.cross_entropy(logits, labels, grad=True, grad_scale=grad_scale)
    return [loss, d]


@given(loss_case(), st.floats(0.1, 4), st.sampled_from([0.0, 1000.0]), seeds())
def test_cross_entropy_on_opencl_matches_cpu_and_float64(ocl, case, grad_scale, shift, seed):
    shape, tiles, vocab, vt = case
    rng = np.random.default_rng(seed)
    logits = (3 * rng.standard_normal(shape + (vocab,)) + shift).astype(np.float32)
    labels = rng.integers(0, vocab, shape)
    cpu, dev = _on_both(ocl, lambda: (nl.from_numpy(logits, tiles + (vt,)),
                                      nl.from_numpy(labels, tiles)),
                        lambda x, la: _cross_entropy(x, la, grad_scale))
    # each against float64 (tests/ops/test_loss.py: the loss's and gradient's magnitudes;
    # OpenCL's exp is ≤ 3 ulps, within the same roundings' room)
    for got in (cpu, dev):
        check_loss(got[0], got[1], logits, labels, grad_scale, shape, tiles, vt, vocab)


@given(st.integers(1, 60), st.integers(1, 4), st.integers(2, 30), seeds())
def test_cross_entropy_near_zero_keeps_its_digits_on_opencl(ocl, ntokens, nsplit, vocab,
                                                             seed):
    """One logit 12 above the rest: the loss is ~1e-5 per token, log s with s = 1 + 6e-6·V.
    A float32 s would keep 2 digits of it; the float-float sum keeps float32's relative
    precision (and so does the label's gradient entry, p − 1)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, vocab, (ntokens,))
    logits = rng.uniform(-0.5, 0.5, (ntokens, vocab)).astype(np.float32)
    logits[np.arange(ntokens), labels] += 12.0
    vt = -(-vocab // nsplit)
    cpu, dev = _on_both(ocl, lambda: (nl.from_numpy(logits, (7, vt)),
                                      nl.from_numpy(labels, (7,))),
                        lambda x, la: _cross_entropy(x, la, 1.0))
    # the loss's magnitude here is the loss itself (the label is the row's max): so its
    # digits are float32's relative ones
    for got in (cpu, dev):
        check_loss(got[0], got[1], logits, labels, 1.0, (ntokens,), (7,), vt, vocab)
    _, dwant = reference(logits, labels, 1.0)
    picked = (np.arange(ntokens), labels)
    ulps = loss_ulps((ntokens,), (7,), vt, vocab)
    for got in (cpu, dev):   # p − 1, relative to itself
        assert_close(got[1][picked], dwant[picked], ulps=ulps, what="p − 1")


@given(loss_case(), st.floats(0.1, 4), seeds())
def test_cross_entropy_gradient_over_the_logits_on_opencl(ocl, case, grad_scale, seed):
    """``out=logits`` on the device: the same bits as a separate gradient there."""
    shape, tiles, vocab, vt = case
    rng = np.random.default_rng(seed)
    logits = (3 * rng.standard_normal(shape + (vocab,))).astype(np.float32)
    labels = rng.integers(0, vocab, shape)
    tl = nl.from_numpy(labels, tiles)
    with ocl.on("opencl"):
        loss, dsep = _cross_entropy(nl.from_numpy(logits, tiles + (vt,)), tl, grad_scale)
        tx = nl.from_numpy(logits, tiles + (vt,))
        loss2, d = nl.ops.cross_entropy(tx, tl, grad=True, grad_scale=grad_scale, out=tx)
        ocl.wait()
    assert np.array_equal(d.to_numpy(), dsep.to_numpy())
    assert np.array_equal(loss2.to_numpy(), loss.to_numpy())


@pytest.mark.parametrize("bad", [7, -3])
def test_an_out_of_range_label_on_opencl_is_the_cpu_error(ocl, bad):
    logits = nl.zeros((2, 3, 7), (1, 2, 3))
    labels = nl.from_numpy(np.array([[0, 1, 2], [3, bad, 6]]), (1, 2))
    with ocl.on("opencl"):
        with pytest.raises(nl.TaskError, match=rf"label {bad} is outside the vocabulary of 7"):
            nl.ops.cross_entropy(logits, labels, grad=True)[0].to_numpy()
        good = nl.from_numpy(np.array([[0, 1, 2], [3, 4, 6]]), (1, 2))
        loss, _ = nl.ops.cross_entropy(logits, good)
        assert_close(loss.to_numpy(), [np.log(7)], ulps=8, what="uniform logits")


# ---- layout: causal mask and permute ---------------------------------------------------

@st.composite
def mask_case(draw):
    """Leading axes (0 to 2) and a square (T, T) pair, each tiled independently."""
    lead, lead_tiles = draw(shape_and_tiles(min_ndim=0, max_ndim=2, max_dim=4))
    t = draw(st.integers(1, 13))
    return lead + (t, t), lead_tiles + (tile_for(draw, t), tile_for(draw, t))


@given(mask_case(), st.sampled_from([float("-inf"), -1e4, 2.5]), seeds())
def test_mask_causal_on_opencl_matches_numpy(ocl, case, value, seed):
    shape, tiles = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

    def masked(t, i):   # a tile with a column right of a row: it gets a task
        (row0, col0), n = t.traits.tile_offsets[i][-2:], t.traits.tile_shapes[i][-1]
        return col0 + n - 1 > row0

    cpu, dev = _on_both(ocl, lambda: (nl.from_numpy(x, tiles),),
                        lambda t: [nl.ops.mask_causal(t, value)], masked)
    t = shape[-1]
    want = np.where(np.triu(np.ones((t, t), bool), 1), np.float32(value), x)
    assert np.array_equal(dev[0], want) and np.array_equal(cpu[0], dev[0])


@given(shape_and_tiles(max_ndim=6, max_dim=5), st.data(), seeds())
def test_permute_on_opencl_matches_numpy(ocl, case, data, seed):
    shape, tiles = case
    perm = data.draw(st.permutations(range(len(shape))))
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    cpu, dev = _on_both(ocl, lambda: (nl.from_numpy(x, tiles),),
                        lambda t: [nl.ops.permute(t, perm)])
    assert np.array_equal(dev[0], np.transpose(x, perm)) and np.array_equal(cpu[0], dev[0])


# ---- bf16 conversions ------------------------------------------------------------------

def _bf16_inputs(rng, shape) -> np.ndarray:
    """float32 over bf16's whole range: wide magnitudes, exact ties (low half 0x8000),
    subnormals, the largest floats (which round to ±inf), ±0, ±inf and NaNs."""
    n = int(np.prod(shape))
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-40, 38, n)).astype(np.float32)
    u = x.view(np.uint32)
    kind = rng.integers(0, 7, n)
    u[kind == 1] = (u[kind == 1] & 0xFFFF0000) | 0x8000
    u[kind == 2] = rng.integers(0, 0x10000, (kind == 2).sum())
    x[kind == 3] = np.float32(3.4e38) * rng.choice([-1, 1], (kind == 3).sum())
    x[kind == 4] = rng.choice([0.0, -0.0, np.inf, -np.inf], (kind == 4).sum())
    u[kind == 5] = rng.choice([0x7FC00000, 0xFF800001, 0x7F80FFFF], (kind == 5).sum())
    return x.reshape(shape)


@given(shape_and_tiles(max_dim=7), seeds())
def test_bf16_conversions_on_opencl_are_the_cpus_bits(ocl, case, seed):
    shape, tiles = case
    x = _bf16_inputs(np.random.default_rng(seed), shape)
    cpu, dev = _on_both(ocl, lambda: (nl.from_numpy(x, tiles),),
                        lambda t: [nl.ops.to_bf16(t)])
    bits = dev[0].view(np.uint16)
    assert np.array_equal(bits, cpu[0].view(np.uint16))
    finite = np.isfinite(x)   # ml_dtypes rounds to nearest even too (NaN payloads aside)
    assert np.array_equal(bits[finite], x[finite].astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.isnan(dev[0].astype(np.float32)[np.isnan(x)]).all()
    back_cpu, back_dev = _on_both(ocl, lambda: (nl.from_numpy(dev[0], tiles),),
                                  lambda t: [nl.ops.to_f32(t)])
    assert np.array_equal(back_dev[0].view(np.uint32), back_cpu[0].view(np.uint32))
    assert np.array_equal(back_dev[0].view(np.uint32), bits.astype(np.uint32) << 16)
