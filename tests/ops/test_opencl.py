"""The OpenCL worker (issue 18): every op with an OpenCL implementation, forced onto it
with ``Runtime.on("opencl")``, against the same op forced onto the CPU, over random
shapes and tilings; tiles in the device's memory node and back; the clear errors.

Runs on PoCL's OpenCL device here (scripts/setup.sh installs it) and on a GPU's driver
elsewhere. No OpenCL device fails these tests loudly: they never skip."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab._lib import ffi, lib
from nntile_lab.ops._common import NoImplementation
from nntile_lab.ops._generated import OPS
from nntile_lab.runtime import opencl_devices
from tests.conftest import rel_err
from tests.ops.test_generated import _codegen
from tests.ops.test_reduce import axis_case, drop, fiber_sum, sum_err
from tests.ops.test_softmax import masked_input, softmax_ref
from tests.ops.two_workers import (
    gemm_error_on,
    handles,
    on_cpu_and,
    optimizer_arrays,
    optimizer_runs,
)
from tests.strategies import gemm_case, shape_and_tiles

RNG = np.random.default_rng(18)
ROWS = [ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]


def _has_opencl(row: str) -> bool:
    return bool(lib.nl_op_has_opencl(ROWS.index(row)))


OCL_OPS = sorted(name for name, op in OPS.items() if _has_opencl(op.row))


AXIS_ROWS = ("sum_slice", "sumsq_slice", "sumprod_slice", "max_slice", "sum_fiber",
             "sumsq_all", "softmax_sumexp", "softmax_apply", "softmax_tile",
             "softmax_backward_sums", "softmax_backward", "softmax_backward_tile",
             "layer_norm_invstd", "layer_norm_apply", "layer_norm_tile",
             "layer_norm_backward_sums", "layer_norm_backward_dx", "layer_norm_backward_tile",
             "layer_norm_backward_fiber")


def test_the_table_gives_opencl_to_the_element_wise_family_and_gemm():
    assert {"add", "scale", "mul", "gelu", "gelu_backward", "relu", "silu"} <= set(OCL_OPS)
    for row in ("fill", "fill_i64", "copy", "copy_i64", "gemm", "adamw", "sgd",
                "sgd_momentum", "add_slice", "mul_slice", "add_fiber", "mul_fiber") + AXIS_ROWS:
        assert _has_opencl(row), row
    assert not _has_opencl("gemm_bf16")   # oneDNN's: the CPU only


@pytest.mark.parametrize("axis,message", [
    ("m, k", r"opencl_axis='m, k' is not three C expressions 'm, k, n'"),
    ("m, k, n, n", r"opencl_axis=.m, k, n, n. is not three C expressions"),
    ("m, q, n", r"opencl_axis='m, q, n' uses q, not arguments of the row"),
])
def test_the_generator_refuses_a_bad_axis_launch_naming_it(axis, message):
    cg = _codegen()
    good = next(r for r in cg.CODELETS if r.name == "sum_slice")
    cg.CODELETS = [dataclasses.replace(good, name="bad_op", opencl_axis=axis)]
    with pytest.raises(cg.TableError, match=rf"^codelet bad_op: {message}"):
        cg.generate_c()


def test_an_axis_row_launches_its_kernel_over_its_axis():
    cg = _codegen()
    row = next(r for r in cg.CODELETS if r.name == "sum_fiber")
    cg.CODELETS = [row]
    src = cg.generate_c()
    assert ('nl_ocl_launch_axis("nl_sum_fiber", (int64_t)(packed->n == 1 ? 1 : packed->k), '
            "(int64_t)(packed->n == 1 ? packed->m : packed->m*packed->n), "
            "(int64_t)(packed->n == 1 ? packed->k : 1), 7, sizes, values);") in src
    # the shared helpers come first in the program, whatever the files' names
    assert src.index("nl_sum_y") < src.index("__kernel")


def _run(rt, kind, name, arrays, tiles, scalars):
    """Op ``name`` on worker ``kind``: its output as numpy (an RW output starts as given)."""
    op = OPS[name]
    tensors = {k: nl.from_numpy(v, tiles) for k, v in arrays.items()}
    with rt.on(kind):
        out = getattr(nl.ops, name)(**tensors, **scalars)
        rt.wait()
    out = out if out is not None else tensors[op.output]
    if kind == "opencl":   # it ran there: the device holds the output (nothing else
        # would bring it there; StarPU may also have written it back to RAM while idle)
        node = rt.opencl_memory_node()
        assert all(lib.starpu_data_is_on_node(h, node) for h in handles(out))
    return out.to_numpy()


@pytest.mark.parametrize("name", OCL_OPS)
@given(shape_and_tiles(), st.floats(-2, 2), st.sampled_from([0.0, 1.0, -0.5]))
def test_element_wise_on_opencl_matches_cpu(ocl, name, case, scalar, beta):
    shape, tiles = case
    op = OPS[name]
    arrays = {i: RNG.standard_normal(shape).astype(np.float32) * 2 for i in op.inputs}
    if op.rw:   # the RW output's old value: NaN where beta == 0 must overwrite it unread
        arrays[op.output] = (np.full(shape, np.nan, np.float32) if beta == 0.0
                             else RNG.standard_normal(shape).astype(np.float32))
    scalars = {s: (beta if s == "beta" else scalar) for s in op.scalars}
    want = _run(ocl, "cpu", name, dict(arrays), tiles, scalars)
    got = _run(ocl, "opencl", name, dict(arrays), tiles, scalars)
    assert np.isfinite(got).all() == np.isfinite(want).all()
    # the CPU's exp is nl_expf, OpenCL's its own: a few ulp apart
    assert rel_err(got, want) <= 2e-6, (name, shape, tiles, scalars)


@given(gemm_case(), st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]))
def test_gemm_on_opencl_matches_numpy(ocl, case, alpha, beta):
    assert gemm_error_on("opencl", ocl, RNG, case, alpha, beta) <= 1e-5


def _on_both(rt, arrays, tiles, run):
    return on_cpu_and("opencl", rt, arrays, tiles, run)


@given(shape_and_tiles(), st.data())
def test_broadcasts_along_an_axis_on_opencl_match_cpu(ocl, case, data):
    shape, tiles = case
    axis = data.draw(st.integers(0, len(shape) - 1))
    alpha, beta = data.draw(st.floats(-2, 2)), data.draw(st.sampled_from([0.0, 1.0, -0.5]))
    cut = lambda t: t[:axis] + t[axis + 1:]   # noqa: E731
    arrays = {"x": RNG.standard_normal(shape).astype(np.float32),
              "s": RNG.standard_normal(cut(shape) or (1,)).astype(np.float32),
              "f": RNG.standard_normal((shape[axis],)).astype(np.float32)}
    if len(shape) == 1:   # a slice of a vector is a scalar: no slice ops then
        arrays.pop("s")
    layout = {"x": tiles, "s": cut(tiles) or (1,), "f": (tiles[axis],)}
    ops = [("add_fiber", "f", (alpha, beta)), ("mul_fiber", "f", ())]
    if "s" in arrays:
        ops += [("add_slice", "s", (alpha, beta)), ("mul_slice", "s", ())]
    for name, v, scalars in ops:
        cpu, ocl_ = _on_both(ocl, arrays, layout, lambda t, name=name, v=v, scalars=scalars:
                             [getattr(nl.ops, name)(t[v], t["x"], axis, *scalars)])
        assert rel_err(ocl_[0], cpu[0]) <= 1e-6, (name, shape, tiles, axis)


@given(shape_and_tiles(), st.integers(1, 5), st.booleans())
def test_optimizer_steps_on_opencl_match_cpu(ocl, case, step, decoupled):
    shape, tiles = case
    arrays = optimizer_arrays(RNG, shape)
    for run in optimizer_runs(shape, tiles, step, decoupled, plain_sgd=True):
        cpu, ocl_ = _on_both(ocl, arrays, dict.fromkeys(arrays, tiles), run)
        for want, got in zip(cpu, ocl_):
            assert rel_err(got, want) <= 1e-6, (run.__name__, shape, tiles)


# ---- the axis-wise families: reductions, softmax, layer norm -------------------------
# Both sides sum in double (the OpenCL kernels where the device has fp64, as PoCL and most
# GPUs do), in different orders, and round once: results agree to an ulp or two of the
# terms' magnitude. The tolerance 1e-6 (about 16 float32 ulps, relative to the sum of the
# terms' absolute values) leaves room for that and for float32 partial sums between
# tiles, and catches any wrong index, lane or reduction step (errors of order 1).
TOL = 1e-6
# axes longer than a work-group (256 items: the loops along the axis go round several
# times), rows of lanes wider than a group's 32 with a partial last group, fibers of one
# value, and split axes of long tiles
LONG = [((3, 1100), (3, 1100), 1), ((2, 600, 40), (2, 600, 40), 1),
        ((700, 5), (700, 5), 0), ((1100,), (1100,), 0), ((2, 600, 40), (2, 250, 33), 1),
        ((37, 300), (20, 300), -1), ((5, 1, 70), (5, 1, 70), 1)]


def _fiber_view(v, a, ndim):
    return v.reshape([-1 if d == a else 1 for d in range(ndim)])


def _check_reductions(rt, shape, tiles, axis, alpha, beta):
    a = axis % len(shape)
    sshape, stiles = drop(shape, a), drop(tiles, a)
    x = RNG.standard_normal(shape).astype(np.float32)
    b = RNG.standard_normal(shape).astype(np.float32)
    # the outputs' old values: NaN where beta == 0 must overwrite them unread
    def old(sh):
        return (np.full(sh, np.nan, np.float32) if beta == 0.0
                else RNG.standard_normal(sh).astype(np.float32))

    arrays = {"x": x, "b": b, "s1": old(sshape), "s2": old(sshape), "s3": old(sshape),
              "f": old((shape[a],)), "all": old((1,))}
    layout = {"x": tiles, "b": tiles, "s1": stiles, "s2": stiles, "s3": stiles,
              "f": (tiles[a],), "all": (1,)}

    def run(t):
        return [nl.ops.sum_slice(t["x"], axis, t["s1"], alpha, beta),
                nl.ops.sumsq_slice(t["x"], axis, t["s2"], alpha, beta),
                nl.ops.sumprod_slice(t["x"], t["b"], axis, t["s3"], alpha, beta),
                nl.ops.max_slice(t["x"], axis),
                nl.ops.sum_fiber(t["x"], axis, t["f"], alpha, beta),
                nl.ops.sumsq_all(t["x"], t["all"], alpha, beta)]

    cpu, got = _on_both(rt, arrays, layout, run)
    x64, ax = x.astype(np.float64), abs(x.astype(np.float64))
    old_term = {k: abs(beta) * abs(np.nan_to_num(arrays[k])) for k in ("s1", "s2", "s3", "f",
                                                                        "all")}
    mags = [abs(alpha) * ax.sum(a) + old_term["s1"],
            abs(alpha) * (x64**2).sum(a) + old_term["s2"],
            abs(alpha) * abs(x64 * b).sum(a) + old_term["s3"],
            None,
            abs(alpha) * fiber_sum(ax, a) + old_term["f"],
            abs(alpha) * (x64**2).sum() + old_term["all"]]
    names = ["sum_slice", "sumsq_slice", "sumprod_slice", "max_slice", "sum_fiber",
             "sumsq_all"]
    for name, want, have, mag in zip(names, cpu, got, mags):
        assert np.isfinite(have).all(), (name, shape, tiles, axis)
        if mag is None:   # max is exact
            assert np.array_equal(have, want), (name, shape, tiles, axis)
        else:
            assert sum_err(have, want, mag) <= TOL, (name, shape, tiles, axis, alpha, beta)


@given(axis_case(), st.floats(-2, 2), st.sampled_from([0.0, 1.0, -0.5]))
def test_reductions_along_an_axis_on_opencl_match_cpu(ocl, case, alpha, beta):
    _check_reductions(ocl, *case, alpha, beta)


def test_max_slice_on_opencl_keeps_nan_and_inf(ocl):
    x = RNG.standard_normal((6, 300)).astype(np.float32)
    x[1, :] = -np.inf       # a fiber of masks: -inf, an ordinary value
    x[2, 7] = np.nan        # a NaN wins, never silently dropped
    x[3, 299] = np.nan      # … wherever it sits (the last lane, the other tile)
    x[4, 5] = np.inf
    for tiles in ((6, 300), (4, 128)):
        with ocl.on("opencl"):
            got = nl.ops.max_slice(nl.from_numpy(x, tiles), 1)
            ocl.wait()
        np.testing.assert_array_equal(got.to_numpy(), x.max(1))


def _check_softmax(rt, shape, tiles, axis, scale, in_place, accumulate):
    a = axis % len(shape)
    x = masked_input(shape, a, scale)
    # a y whose sum is off 1 (by 1e-3, to tell): the backward divides by Σ y, so that dx
    # still sums to 0 along the axis (kernels/cpu/norm.c), on the device too
    y = (softmax_ref(x, axis) * (1 + 1e-3)).astype(np.float32)
    arrays = {"x": x, "y": y, "dy": RNG.standard_normal(shape).astype(np.float32),
              "dx": RNG.standard_normal(shape).astype(np.float32)}

    def run(t):
        fwd = nl.ops.softmax(t["x"], axis, out=t["x"] if in_place else None)
        bwd = nl.ops.softmax_backward(t["y"], t["dy"], axis, t["dx"] if accumulate else None)
        return [fwd, bwd]

    cpu, got = _on_both(rt, arrays, dict.fromkeys(arrays, tiles), run)
    # softmax: each side's exp is a few ulp off exp (the CPU's nl_expf, OpenCL's exp)
    assert rel_err(got[0], cpu[0]) <= 2e-6, (shape, tiles, axis)
    y64, dy64 = y.astype(np.float64), arrays["dy"].astype(np.float64)
    s = np.expand_dims((y64 * dy64).sum(a) / y64.sum(a), a)
    mag = abs(y64) * (abs(dy64) + abs(s)) + (abs(arrays["dx"]) if accumulate else 0)
    assert sum_err(got[1], cpu[1], mag) <= TOL, (shape, tiles, axis)
    if not accumulate:   # (a fiber of one unmasked value: dx is 0 but for rounding)
        dx, floor = got[1].astype(np.float64), 1e-12 * abs(y64 * dy64).sum(a)
        assert np.all(abs(dx.sum(a)) <= 1e-6 * abs(dx).sum(a) + floor), (shape, tiles, axis)


@given(axis_case(), st.sampled_from([1.0, 100.0]), st.booleans(), st.booleans())
def test_softmax_on_opencl_matches_cpu(ocl, case, scale, in_place, accumulate):
    _check_softmax(ocl, *case, scale, in_place, accumulate)


def _check_layer_norm(rt, shape, tiles, axis, offset, in_place, given_grads):
    a, nd = axis % len(shape), len(shape)
    x = (RNG.standard_normal(shape) * 2 + offset).astype(np.float32)
    gamma = (RNG.standard_normal(shape[a]) * 0.5 + 1).astype(np.float32)
    bias = RNG.standard_normal(shape[a]).astype(np.float32)
    dy = RNG.standard_normal(shape).astype(np.float32)
    ft, st_ = (tiles[a],), drop(tiles, a)
    # the forward's mean and inv_std, computed once (on the CPU) and given to both sides
    _, mean, inv_std = nl.ops.layer_norm(nl.from_numpy(x, tiles), nl.from_numpy(gamma, ft),
                                         nl.from_numpy(bias, ft), axis)
    arrays = {"x": x, "x2": x, "gamma": gamma, "bias": bias, "dy": dy,
              "mean": mean.to_numpy(), "inv_std": inv_std.to_numpy(),
              "dx": RNG.standard_normal(shape).astype(np.float32),
              "dgamma": RNG.standard_normal(shape[a]).astype(np.float32),
              "dbeta": RNG.standard_normal(shape[a]).astype(np.float32)}
    layout = {**dict.fromkeys(("x", "x2", "dy", "dx"), tiles), "mean": st_, "inv_std": st_,
              **dict.fromkeys(("gamma", "bias", "dgamma", "dbeta"), ft)}

    def run(t):
        y, mu, r = nl.ops.layer_norm(t["x"], t["gamma"], t["bias"], axis,
                                     out=t["x"] if in_place else None)
        grads = {k: t[k] for k in ("dx", "dgamma", "dbeta") if given_grads}
        dx, dg, db = nl.ops.layer_norm_backward(t["x2"], t["dy"], t["gamma"], t["mean"],
                                                t["inv_std"], axis, **grads)
        return [y, mu, r, dx, dg, db]

    cpu, got = _on_both(rt, arrays, layout, run)
    x64 = x.astype(np.float64)
    r = np.expand_dims(arrays["inv_std"].astype(np.float64), a)
    xmag = (abs(x64) + abs(np.expand_dims(arrays["mean"], a))) * r
    g = abs(dy * _fiber_view(gamma, a, nd))
    mean_a = lambda v: v.mean(a, keepdims=True)  # noqa: E731
    start = {k: abs(arrays[k]) if given_grads else 0 for k in ("dx", "dgamma", "dbeta")}
    mags = [xmag * abs(_fiber_view(gamma, a, nd)) + abs(_fiber_view(bias, a, nd)),
            abs(x64).mean(a), None,
            r * (g + mean_a(g) + xmag * mean_a(g * xmag)) + start["dx"],
            fiber_sum(abs(dy) * xmag, a) + start["dgamma"],
            fiber_sum(abs(dy), a) + start["dbeta"]]
    names = ["y", "mean", "inv_std", "dx", "dgamma", "dbeta"]
    for name, want, have, mag in zip(names, cpu, got, mags):
        err = rel_err(have, want) if mag is None else sum_err(have, want, mag)
        assert err <= TOL, (name, shape, tiles, axis, offset)


@given(axis_case(), st.sampled_from([0.0, 10.0]), st.booleans(), st.booleans())
def test_layer_norm_on_opencl_matches_cpu(ocl, case, offset, in_place, given_grads):
    _check_layer_norm(ocl, *case, offset, in_place, given_grads)


@pytest.mark.parametrize("case", LONG, ids=str)
def test_long_axes_on_opencl_match_cpu(ocl, case):
    _check_reductions(ocl, *case, 0.5, 1.0)
    _check_reductions(ocl, *case, -1.0, 0.0)
    _check_softmax(ocl, *case, 100.0, True, True)
    _check_layer_norm(ocl, *case, 10.0, False, True)


def test_int64_tiles_fill_and_copy_on_opencl(ocl):
    ids = RNG.integers(-2**40, 2**40, (7, 5))
    t = nl.from_numpy(ids, (3, 2))
    with ocl.on("opencl"):
        c = nl.ops.copy(t)
        z = nl.full((7, 5), 2**35 + 3, (4, 5), dtype=np.int64)
        ocl.wait()
    np.testing.assert_array_equal(c.to_numpy(), ids)
    np.testing.assert_array_equal(z.to_numpy(), np.full((7, 5), 2**35 + 3))


def test_a_tile_lives_in_the_device_memory_and_comes_back(ocl):
    node = ocl.opencl_memory_node()
    assert node != 0 and lib.starpu_opencl_worker_get_count() == 1
    x = RNG.standard_normal((64, 48)).astype(np.float32)
    tx = nl.from_numpy(x, (32, 48))
    assert all(lib.starpu_data_is_on_node(h, 0) and not lib.starpu_data_is_on_node(h, node)
               for h in handles(tx))
    with ocl.on("opencl"):
        ty = nl.ops.scale(tx, 3.0)
        ocl.wait()
    # written on the device (StarPU may also write a dirty tile back to RAM while idle,
    # to keep clean buffers: RAM's copy is not checked)
    assert all(lib.starpu_data_is_on_node(h, node) for h in handles(ty))
    assert ocl.memory_used(node) >= x.nbytes
    np.testing.assert_array_equal(ty.to_numpy(), np.float32(3.0) * x)
    assert all(lib.starpu_data_is_on_node(h, 0) for h in handles(ty))


def test_an_op_without_opencl_is_refused_before_its_task(ocl):
    x = nl.from_numpy(RNG.standard_normal((4, 6)).astype(np.float32), (2, 6))
    x16 = nl.ops.to_bf16(x)   # a bf16 GEMM has no OpenCL implementation (oneDNN's)
    with ocl.on("opencl"), pytest.raises(NoImplementation,
                                         match=r"the gemm_bf16 task has no opencl "
                                               r"implementation.*Runtime.on\('opencl'\)"):
        nl.ops.gemm(x16, x16, trans_b=True)
    ocl.wait()   # nothing left half-submitted to hang on
    assert ocl.where == "any"
    with pytest.raises(ValueError, match=r"on\('gpu'\).*any, cpu, opencl"), ocl.on("gpu"):
        pass


def test_the_device_memory_cap_is_starpus():
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with nl.Runtime(ncpu=1, nopencl=1, opencl_memory_limit_mb=64) as rt:
        assert lib.starpu_memory_get_total(rt.opencl_memory_node()) == 64 << 20


def test_bad_requests_are_clear_errors_before_starpu_starts():
    have = opencl_devices()
    with pytest.raises(ValueError, match=rf"nopencl={have + 1} but this machine has {have} "
                                         r"OpenCL device.*clinfo -l"):
        nl.Runtime(ncpu=1, nopencl=have + 1)
    with pytest.raises(ValueError, match=r"nopencl=-1 must be an integer ≥ 0"):
        nl.Runtime(ncpu=1, nopencl=-1)
    with pytest.raises(ValueError, match=r"opencl_memory_limit_mb=64 .*with nopencl ≥ 1"):
        nl.Runtime(ncpu=1, opencl_memory_limit_mb=64)
    with pytest.raises(ValueError, match=r"opencl_memory_limit_mb=8 must be an integer from 16"):
        nl.Runtime(ncpu=1, nopencl=1, opencl_memory_limit_mb=8)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with (nl.Runtime(ncpu=1) as rt,
          pytest.raises(ValueError, match=r"Runtime\(nopencl=1\)"), rt.on("opencl")):
        pass

