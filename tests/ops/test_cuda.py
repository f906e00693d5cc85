"""The CUDA worker (issue 18 §5), on an NVIDIA GPU: every family with a CUDA implementation
forced onto it with ``Runtime.on("cuda")`` against the same op on the CPU, over random shapes
and tilings; tiles on the GPU's memory node; CuPy interop without a host copy.

Marker ``cuda``: deselected by default (pyproject's addopts); on a machine with a GPU, a
StarPU built with CUDA (scripts/build_starpu_cuda.sh) and CuPy, run them with
``pytest -m cuda`` (docs/accelerators.md). There they fail loudly, never skip, when a piece
is missing. They have not run where this code was written: no GPU was lent to it."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.ops._generated import OPS
from nntile_lab.runtime import cuda_devices
from tests.ops.test_loss import check_loss
from tests.ops.test_reduce import axis_case
from tests.ops.two_workers import (
    check_broadcasts_on,
    check_element_wise_on,
    check_layer_norm_on,
    check_optimizers_on,
    check_reductions_on,
    check_softmax_on,
    element_wise_arrays,
    gemm_check_on,
    handles,
    on_cpu_and,
)
from tests.strategies import gemm_case, seeds, shape_and_tiles
from tests.tolerance import assert_close, rel_err

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu():
    if not lib.nl_cuda_built() or cuda_devices() < 1:
        pytest.fail("no CUDA: these tests need a StarPU built with CUDA "
                    "(scripts/build_starpu_cuda.sh, then rebuild nntile_lab with "
                    "STARPU_PREFIX) and a GPU (`nvidia-smi -L`)", pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with nl.Runtime(scheduler="dmda", ncpu=1, ncuda=1) as runtime:
        yield runtime


# Each family as on OpenCL (tests/ops/two_workers.py): both workers against float64, or the
# GPU against the CPU, within the ulps of each op's terms (tests/tolerance.py); CUDA's expf
# is ≤ 2 ulps, inside the same room.
@pytest.mark.parametrize("name", sorted(OPS))
@given(shape_and_tiles(), st.floats(-2, 2), st.sampled_from([0.0, 1.0, -0.5]), seeds())
def test_element_wise_on_cuda_matches_cpu(gpu, name, case, scalar, beta, seed):
    shape, tiles = case
    arrays = element_wise_arrays(np.random.default_rng(seed), name, shape, beta)
    scalars = {s: (beta if s == "beta" else scalar) for s in OPS[name].scalars}
    check_element_wise_on("cuda", gpu, name, arrays, tiles, scalars)


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]), seeds())
def test_gemm_on_cuda_matches_numpy(gpu, case, alpha, beta, seed):
    # cuBLAS may use TF32 only if asked: it is not, so fp32 holds
    gemm_check_on("cuda", gpu, np.random.default_rng(seed), case, alpha, beta)


@given(shape_and_tiles(), st.data(), seeds())
def test_broadcasts_along_an_axis_on_cuda_match_cpu(gpu, case, data, seed):
    check_broadcasts_on("cuda", gpu, np.random.default_rng(seed), data, *case)


@given(axis_case(), st.floats(-2, 2), st.sampled_from([0.0, 1.0, -0.5]), seeds())
def test_reductions_along_an_axis_on_cuda_match_cpu(gpu, case, alpha, beta, seed):
    check_reductions_on("cuda", gpu, np.random.default_rng(seed), *case, alpha, beta)


@given(axis_case(), st.sampled_from([1.0, 100.0]), st.booleans(), st.booleans(), seeds())
def test_softmax_on_cuda_matches_cpu(gpu, case, scale, in_place, accumulate, seed):
    check_softmax_on("cuda", gpu, np.random.default_rng(seed), *case, scale, in_place,
                     accumulate)


@given(axis_case(), st.sampled_from([0.0, 10.0]), st.booleans(), st.booleans(), seeds())
def test_layer_norm_on_cuda_matches_cpu(gpu, case, offset, in_place, given_grads, seed):
    check_layer_norm_on("cuda", gpu, np.random.default_rng(seed), *case, offset, in_place,
                        given_grads)


@given(st.integers(1, 40), st.integers(1, 4), st.integers(2, 300), st.integers(1, 300),
       st.data(), seeds())
def test_embedding_and_cross_entropy_on_cuda_match_cpu(gpu, ntok, ttile, vocab, vt, data,
                                                       seed):
    rng = np.random.default_rng(seed)
    e = data.draw(st.integers(1, 16))
    ids = rng.integers(0, vocab, (ntok,))
    arrays = {"ids": ids, "table": rng.standard_normal((vocab, e)).astype(np.float32),
              "dout": rng.standard_normal((ntok, e)).astype(np.float32),
              "logits": rng.standard_normal((ntok, vocab)).astype(np.float32) * 4}
    tt, vt = min(ttile, ntok), min(vt, vocab)
    layout = {"ids": (tt,), "table": (vt, e), "dout": (tt, e), "logits": (tt, vt)}

    def embed(t):
        out = nl.ops.embedding(t["ids"], t["table"])
        dtable = nl.zeros((vocab, e), (vt, e))
        nl.ops.embedding_backward(t["ids"], t["dout"], dtable)
        return [out, dtable]

    def loss(t):
        value, dlogits = nl.ops.cross_entropy(t["logits"], t["ids"], grad=True)
        return [value, dlogits]

    cpu, gpu_ = on_cpu_and("cuda", gpu, arrays, layout, embed)
    want = np.zeros((vocab, e))
    np.add.at(want, ids, arrays["dout"].astype(np.float64))
    mag = np.zeros((vocab, e))
    np.add.at(mag, ids, abs(arrays["dout"]).astype(np.float64))
    for got in (cpu, gpu_):
        np.testing.assert_array_equal(got[0], arrays["table"][ids])
        assert_close(got[1], want, mag, ulps=ntok + 1, what="embedding_backward")
    cpu, gpu_ = on_cpu_and("cuda", gpu, arrays, layout, loss)
    for got in (cpu, gpu_):
        check_loss(got[0], got[1], arrays["logits"], ids, 1.0, (ntok,), (tt,), vt, vocab)


@given(st.integers(1, 40), st.integers(1, 4), st.integers(2, 300), st.integers(1, 300),
       st.integers(1, 96), st.integers(0, 2**32 - 1))
def test_the_bf16_head_on_cuda_matches_cpu(gpu, ntok, ttile, vocab, vt, e, seed):
    """The bf16 modes' head on the GPU: logits = bf16(x·wteᵀ) (gemm_bf16_c16: cuBLAS, float32
    sums rounded once) and the cross-entropy of bf16 logits (its statistics, the bf16
    gradient), each against the CPU's. Both products round float32 sums that differ by at
    most 2·e·2⁻²⁴·Σ|x||w| (their orders differ), so a value may land one bf16 ulp (2⁻⁷ of
    it) apart; the cross-entropy, fed the same bf16 logits, differs only by expf's ulps and
    the order of its double sums: the loss to 1e-6, a gradient value by at most its ulp."""
    from nntile_lab.tensor import BFLOAT16
    rng = np.random.default_rng(seed)   # the test's own draw: a failure replays
    ids = rng.integers(0, vocab, (ntok,))
    x = rng.standard_normal((ntok, e)).astype(BFLOAT16)
    w = rng.standard_normal((vocab, e)).astype(BFLOAT16)
    tt, vt = min(ttile, ntok), min(vt, vocab)
    layout = {"x": (tt, e), "w": (vt, e), "ids": (tt,)}
    cpu, gpu_ = on_cpu_and("cuda", gpu, {"x": x, "w": w}, layout, lambda t: [
        nl.ops.gemm(t["x"], t["w"], trans_b=True, out_dtype=BFLOAT16)])
    want, got = (a[0].astype(np.float64) for a in (cpu, gpu_))
    mag = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T
    assert (np.abs(got - want) <= 2.0**-7 * np.abs(want) + 2 * e * 2.0**-24 * mag).all()
    logits = cpu[0]   # the same bf16 logits for both
    cpu, gpu_ = on_cpu_and("cuda", gpu, {"logits": logits, "ids": ids},
                         {"logits": (tt, vt), "ids": (tt,)},
                         lambda t: list(nl.ops.cross_entropy(t["logits"], t["ids"], grad=True)))
    assert abs(float(gpu_[0][0]) - float(cpu[0][0])) <= 1e-6 * abs(float(cpu[0][0]))
    want, got = cpu[1].astype(np.float64), gpu_[1].astype(np.float64)
    assert (np.abs(got - want) <= 2.0**-7 * np.abs(want) + 2.0**-133).all()


def test_a_bad_token_id_on_cuda_is_a_task_error(gpu):
    ids = nl.from_numpy(np.array([0, 7, 3], np.int64), (3,))
    table = nl.from_numpy(np.ones((5, 2), np.float32), (5, 2))
    with gpu.on("cuda"):
        nl.ops.embedding(ids, table)
        with pytest.raises(nl.TaskError, match=r"token id 7 is outside the vocabulary of 5"):
            gpu.wait()


@given(shape_and_tiles(), st.integers(1, 5), st.booleans(), seeds())
def test_optimizer_steps_on_cuda_match_cpu(gpu, case, step, flag, seed):
    shape, tiles = case
    check_optimizers_on("cuda", gpu, np.random.default_rng(seed), shape, tiles, step, flag)


def test_layout_and_bf16_on_cuda_match_cpu(gpu):
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    arrays, layout = {"x": x}, {"x": (1, 3, 4, 8)}
    runs = [lambda t: [nl.ops.mask_causal(t["x"])],
            lambda t: [nl.ops.permute(t["x"], (0, 2, 1, 3))],
            lambda t: [nl.ops.to_f32(nl.ops.to_bf16(t["x"]))]]
    for run in runs:
        cpu, gpu_ = on_cpu_and("cuda", gpu, arrays, layout, run)
        for want, got in zip(cpu, gpu_):
            np.testing.assert_array_equal(got, want)


def test_tiles_go_to_cupy_and_back_without_a_host_copy(gpu):
    import cupy
    x = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32)
    t = nl.from_numpy(x, (4, 10))
    with gpu.on("cuda"):
        y = nl.ops.scale(t, 2.0)
    node = gpu.cuda_memory_node()
    with y.to_cupy() as tiles:
        assert [a.shape for a in tiles] == [(4, 10), (2, 10)]
        # the arrays are StarPU's own buffers on the GPU, not copies
        assert [a.data.ptr for a in tiles] == [lib.nl_tile_pointer_on_node(h, node)
                                               for h in handles(y)]
        np.testing.assert_array_equal(cupy.asnumpy(cupy.concatenate(tiles)), 2 * x)
    with y.to_cupy(write=True) as tiles:
        for a in tiles:
            a += 1
    np.testing.assert_array_equal(y.to_numpy(), 2 * x + 1)
    z = nl.from_cupy(cupy.asarray(x) * 3, (5, 4))
    assert all(lib.starpu_data_is_on_node(h, node) for h in handles(z))
    np.testing.assert_array_equal(z.to_numpy(), 3 * x)
    with pytest.raises(TypeError, match="float32 or int64"):
        nl.from_cupy(cupy.zeros((2, 2), cupy.float16))
    with pytest.raises(TypeError, match="bfloat16"):
        nl.ops.to_bf16(t).to_cupy()


@pytest.mark.parametrize("precision, embd_tile, rtol", [
    ("fp32", 10, 1e-5),
    # n_embd in one tile: the bf16 head (bf16 logits, gemm_bf16_c16, the bf16 cross-entropy).
    # Every GEMM output is rounded to bf16 on both from float32 sums in other orders: a value
    # straddling a rounding boundary lands one ulp (2⁻⁷) apart; the loss, a mean over tokens
    # of such values, moves by far less than bf16's unit 2⁻⁸, the bound
    ("bf16", 24, 2.0**-8)])
def test_gpt2_steps_on_cuda_give_the_cpu_runs_losses(gpu, precision, embd_tile, rtol):
    """Three AdamW steps of a tiled 1-layer GPT-2 confined to the GPU, then to the CPU: the
    same losses within float32 (bf16) tolerance (every op of the step has a CUDA
    implementation: on("cuda") would raise for one without)."""
    from nntile_lab.optim import AdamW
    cfg = nl.GPT2Config(n_layer=1, n_head=4, n_embd=24, n_positions=16, vocab_size=97,
                        n_inner=40, batch_tile=2, seq_tile=5, embd_tile=embd_tile,
                        inner_tile=16, head_tile=3, vocab_tile=30)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (3, 14))
    losses = {}
    for kind in ("cpu", "cuda"):
        with gpu.on(kind):
            model = nl.GPT2(cfg, seed=1, precision=precision)
            opt = AdamW(model, lr=1e-2, weight_decay=0.1)
            losses[kind] = []
            for _ in range(3):
                losses[kind].append(model.forward_backward(ids[:, :-1], ids[:, 1:]))
                opt.step(clip_norm=1.0)
            gpu.wait()
            model.free()
    # a whole model's losses (thousands of kernels deep), not one kernel's output: norm-wise
    assert rel_err(losses["cuda"], losses["cpu"]) <= rtol, losses
