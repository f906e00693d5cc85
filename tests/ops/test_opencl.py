"""The OpenCL worker (issue 18): every op with an OpenCL implementation, forced onto it
with ``Runtime.on("opencl")``, against the same op forced onto the CPU, over random
shapes and tilings; tiles in the device's memory node and back; the clear errors.

Runs on PoCL's OpenCL device here (scripts/setup.sh installs it) and on a GPU's driver
elsewhere. No OpenCL device fails these tests loudly: they never skip."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab._lib import ffi, lib
from nntile_lab.ops._common import NoImplementation
from nntile_lab.ops._generated import OPS
from nntile_lab.runtime import opencl_devices
from tests.conftest import cond_err, rel_err
from tests.strategies import gemm_case, gemm_layouts, shape_and_tiles

RNG = np.random.default_rng(18)
ROWS = [ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]


def _has_opencl(row: str) -> bool:
    return bool(lib.nl_op_has_opencl(ROWS.index(row)))


OCL_OPS = sorted(name for name, op in OPS.items() if _has_opencl(op.row))


@pytest.fixture(scope="module")
def ocl():
    if not lib.nl_opencl_built() or opencl_devices() < 1:
        pytest.fail("no OpenCL device (or a build without OpenCL): run scripts/setup.sh "
                    "(pocl-opencl-icd, libclblast-dev), rebuild, check `clinfo -l`",
                    pytrace=False)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with nl.Runtime(scheduler="dmda", ncpu=1, nopencl=1) as runtime:
        yield runtime


def test_the_table_gives_opencl_to_the_element_wise_family_and_gemm():
    assert {"add", "scale", "mul", "gelu", "gelu_backward", "relu", "silu"} <= set(OCL_OPS)
    for row in ("fill", "fill_i64", "copy", "copy_i64", "gemm", "adamw", "sgd",
                "sgd_momentum", "add_slice", "mul_slice", "add_fiber", "mul_fiber"):
        assert _has_opencl(row)
    assert not _has_opencl("layer_norm_tile")


def _handles(t):
    return [t.handles[i] for i in range(t.ntiles)]


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
        assert all(lib.starpu_data_is_on_node(h, node) for h in _handles(out))
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
    dims, tiles, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = RNG.standard_normal(a_shape).astype(np.float32)
    b = RNG.standard_normal(b_shape).astype(np.float32)
    # beta == 0: C full of NaN must come out overwritten (BLAS rule), not NaN
    c0 = (RNG.standard_normal(c_shape).astype(np.float32) if beta
          else np.full(c_shape, np.nan, np.float32))
    nb, nk = len(dims["b"]), len(dims["k"])
    bsz, m, n, k = (int(np.prod(dims[g])) for g in "bmnk")
    a2 = a.astype(np.float64).reshape((bsz, k, m) if ta else (bsz, m, k))
    b2 = b.astype(np.float64).reshape((bsz, n, k) if tb else (bsz, k, n))
    opa, opb = (a2.transpose(0, 2, 1) if ta else a2), (b2.transpose(0, 2, 1) if tb else b2)
    c_term = beta * np.nan_to_num(c0) if beta else 0.0
    want = alpha * np.matmul(opa, opb).reshape(c_shape) + c_term
    magnitude = abs(alpha) * np.matmul(abs(opa), abs(opb)).reshape(c_shape) + abs(c_term)
    ta_, tb_, tc = (nl.from_numpy(x, t) for x, t in ((a, a_tiles), (b, b_tiles), (c0, c_tiles)))
    with ocl.on("opencl"):
        got = nl.ops.gemm(ta_, tb_, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, out=tc,
                          ndim=nk, batch_ndim=nb)
        ocl.wait()
    assert cond_err(got.to_numpy(), want, magnitude) <= 1e-5


def _on_both(rt, arrays, tiles, run):
    """``run(tensors)`` (tensors from ``arrays``, tiled by ``tiles[name]``) on the CPU and
    on the OpenCL worker: the tensors it returns, as numpy, for each."""
    out = {}
    for kind in ("cpu", "opencl"):
        tensors = {k: nl.from_numpy(v, tiles[k]) for k, v in arrays.items()}
        with rt.on(kind):
            got = run(tensors)
            rt.wait()
        if kind == "opencl":   # it ran there (see _run)
            node = rt.opencl_memory_node()
            assert all(lib.starpu_data_is_on_node(h, node) for t in got for h in _handles(t))
        out[kind] = [t.to_numpy() for t in got]
    return out["cpu"], out["opencl"]


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
    arrays = {k: RNG.standard_normal(shape).astype(np.float32) for k in ("p", "g", "buf")}
    layout = dict.fromkeys(arrays, tiles)

    def adamw(t):   # fresh moments: first read on the device, as zeros (the init codelet)
        m, v = nl.tensor.empty(shape, tiles), nl.tensor.empty(shape, tiles)
        nl.ops.adamw(t["p"], t["g"], m, v, step=step, lr=1e-2, weight_decay=0.1,
                     decoupled=decoupled, grad_scale=0.5)
        return [t["p"], m, v]

    def sgd(t):
        nl.ops.sgd(t["p"], t["g"], t["buf"], lr=0.1, momentum=0.9, weight_decay=0.01,
                   nesterov=decoupled, first=step == 1)
        nl.ops.sgd(t["p"], t["g"], None, lr=0.05)
        return [t["p"], t["buf"]]

    for run in (adamw, sgd):
        cpu, ocl_ = _on_both(ocl, arrays, layout, run)
        for want, got in zip(cpu, ocl_):
            assert rel_err(got, want) <= 1e-6, (run.__name__, shape, tiles)


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
               for h in _handles(tx))
    with ocl.on("opencl"):
        ty = nl.ops.scale(tx, 3.0)
        ocl.wait()
    # written on the device (StarPU may also write a dirty tile back to RAM while idle,
    # to keep clean buffers: RAM's copy is not checked)
    assert all(lib.starpu_data_is_on_node(h, node) for h in _handles(ty))
    assert ocl.memory_used(node) >= x.nbytes
    np.testing.assert_array_equal(ty.to_numpy(), np.float32(3.0) * x)
    assert all(lib.starpu_data_is_on_node(h, 0) for h in _handles(ty))


def test_an_op_without_opencl_is_refused_before_its_task(ocl):
    x = nl.from_numpy(RNG.standard_normal((4, 6)).astype(np.float32), (2, 6))
    with ocl.on("opencl"), pytest.raises(NoImplementation,
                                         match=r"layer_norm\w* task has no opencl"):
        nl.ops.layer_norm(x, nl.full((6,), 1.0), nl.zeros((6,)))
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
    with pytest.raises(ValueError, match=r"opencl_memory_limit_mb=8 must be an integer ≥ 16"):
        nl.Runtime(ncpu=1, nopencl=1, opencl_memory_limit_mb=8)
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()
    with (nl.Runtime(ncpu=1) as rt,
          pytest.raises(ValueError, match=r"Runtime\(nopencl=1\)"), rt.on("opencl")):
        pass
