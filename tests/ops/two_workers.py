"""One computation on the CPU worker and on an accelerator worker (OpenCL or CUDA), for the
tests that compare the two: test_opencl.py and test_cuda.py."""
import numpy as np
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.ops._generated import OPS
from tests.ops.elementwise_ref import reference
from tests.ops.test_reduce import drop, fiber_sum, n_tiles
from tests.ops.test_softmax import masked_input, softmax_magnitude, softmax_ref
from tests.strategies import gemm_layouts, gemm_reference, gemm_ulps
from tests.tolerance import assert_close


def handles(t):
    return [t.handles[i] for i in range(t.ntiles)]


def memory_node(rt, kind: str) -> int:
    return rt.opencl_memory_node() if kind == "opencl" else rt.cuda_memory_node()


def on_cpu_and(kind: str, rt, arrays, tiles, run):
    """``run(tensors)`` (tensors from ``arrays``, tiled by ``tiles[name]``) on the CPU and on
    the ``kind`` worker: the tensors it returns, as numpy, for each. What ran on the
    accelerator left its outputs in the accelerator's memory (nothing else would bring them
    there; StarPU may also have written them back to RAM while idle)."""
    out = {}
    for where in ("cpu", kind):
        tensors = {k: nl.from_numpy(v, tiles[k]) for k, v in arrays.items()}
        with rt.on(where):
            got = run(tensors)
            rt.wait()
        if where == kind:
            node = memory_node(rt, kind)
            assert all(lib.starpu_data_is_on_node(h, node) for t in got for h in handles(t))
        out[where] = [t.to_numpy() for t in got]
    return out["cpu"], out[kind]


# the optimizer steps both workers run (optimizer_runs) and their float64 references
ADAMW = dict(lr=1e-2, weight_decay=0.1, grad_scale=0.5, beta1=0.9, beta2=0.999, eps=1e-8)
SGD = dict(lr=0.1, momentum=0.9, weight_decay=0.01)
PLAIN_SGD_LR = 0.05
# roundings on the longest path of each step: a scaled gradient (2), the moment (2), a
# square root, a division and the update (AdamW); SGD's momentum update and step (≤ 6)
OPTIMIZER_ULPS = {"adamw": 10, "sgd": 8}


def optimizer_runs(shape, tiles, step: int, flag: bool, plain_sgd: bool = False):
    """AdamW (fresh moments: first read on the worker as zeros, the init codelet) and SGD
    with momentum, ``flag`` choosing decoupled weight decay and Nesterov; ``plain_sgd`` adds
    an SGD step without a momentum buffer. Each returns the tensors it wrote."""
    def adamw(t):
        m, v = nl.tensor.empty(shape, tiles), nl.tensor.empty(shape, tiles)
        nl.ops.adamw(t["p"], t["g"], m, v, step=step, decoupled=flag, **ADAMW)
        return [t["p"], m, v]

    def sgd(t):
        nl.ops.sgd(t["p"], t["g"], t["buf"], nesterov=flag, first=step == 1, **SGD)
        if plain_sgd:
            nl.ops.sgd(t["p"], t["g"], None, lr=PLAIN_SGD_LR)
        return [t["p"], t["buf"]]

    return adamw, sgd


def optimizer_reference(run: str, arrays: dict, step: int, flag: bool,
                        plain_sgd: bool = False) -> list:
    """``[(want, magnitude), ...]`` in float64 for the tensors ``optimizer_runs``' ``run``
    returns, from the kernels' formulas (kernels/cpu/optim.c) with the scalars rounded to
    float32 as the kernels take them. A magnitude is the sum of the terms made positive; for
    AdamW's p it adds the update's condition in g' (m/(√v + eps) turns over where g' ≈ 0,
    within eps: an error of g' moves it by (1 − β1)·eps/(…)² per unit)."""
    f32 = lambda v: np.float64(np.float32(v))   # noqa: E731
    p, g = (np.asarray(arrays[k], np.float64) for k in ("p", "g"))
    if run == "adamw":
        a = ADAMW
        b1, b2 = a["beta1"], a["beta2"]
        ss, ibc = f32(a["lr"] / (1 - b1**step)), f32(1 / np.sqrt(1 - b2**step))
        decay, l2 = (f32(1 - a["lr"] * a["weight_decay"]), 0.0) if flag \
            else (1.0, f32(a["weight_decay"]))
        gs, eps, c1, c2 = f32(a["grad_scale"]), f32(a["eps"]), f32(1 - b1), f32(1 - b2)
        gp, big_g = gs * g + l2 * p, abs(gs * g) + abs(l2 * p)
        m, v = c1 * gp, c2 * gp**2
        den = np.sqrt(v) * ibc + eps
        slope = c1 * eps / den**2                       # d(m/den)/dg'
        want_p = decay * p - ss * m / den
        mag_p = abs(decay * p) + ss * (abs(m / den) + slope * big_g)
        return [(want_p, mag_p), (m, c1 * big_g), (v, c2 * (gp**2 + 2 * abs(gp) * big_g))]
    if run == "sgd":
        lr, mom, wd = f32(SGD["lr"]), f32(SGD["momentum"]), f32(SGD["weight_decay"])
        buf = np.asarray(arrays["buf"], np.float64)
        d, big_d = g + wd * p, abs(g) + abs(wd * p)
        if step == 1:
            b, mag_b = d, big_d
        else:
            b, mag_b = mom * buf + d, abs(mom * buf) + big_d
        upd, mag_upd = (d + mom * b, big_d + mom * mag_b) if flag else (b, mag_b)
        want_p, mag_p = p - lr * upd, abs(p) + lr * mag_upd
        if plain_sgd:
            lr2 = f32(PLAIN_SGD_LR)
            want_p, mag_p = want_p - lr2 * g, mag_p + abs(lr2 * g)
        return [(want_p, mag_p), (b, mag_b)]
    raise KeyError(run)


def optimizer_arrays(rng, shape) -> dict:
    return {k: rng.standard_normal(shape).astype(np.float32) for k in ("p", "g", "buf")}


def check_optimizers_on(kind: str, rt, rng, shape, tiles, step: int, flag: bool,
                        plain_sgd: bool = False) -> None:
    """Both optimizer steps on the CPU and on the ``kind`` worker, each against float64."""
    arrays = optimizer_arrays(rng, shape)
    for run in optimizer_runs(shape, tiles, step, flag, plain_sgd):
        cpu, acc = on_cpu_and(kind, rt, arrays, dict.fromkeys(arrays, tiles), run)
        ref = optimizer_reference(run.__name__, arrays, step, flag, plain_sgd)
        for where, outs in (("cpu", cpu), (kind, acc)):
            for i, (got, (want, mag)) in enumerate(zip(outs, ref)):
                assert_close(got, want, mag, ulps=OPTIMIZER_ULPS[run.__name__],
                             what=(where, run.__name__, i, shape, tiles, step, flag))


def gemm_check_on(kind: str, rt, rng, case, alpha: float, beta: float) -> None:
    """A ``gemm_case`` on the ``kind`` worker against the float64 reference, within γ_k of
    |α|·|A|·|B| + |β|·|C| (``tests.tolerance.dot_ulps``). With β = 0, C starts full of NaN
    and must come out overwritten (BLAS's rule)."""
    dims, _, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    c0 = (rng.standard_normal(c_shape).astype(np.float32) if beta
          else np.full(c_shape, np.nan, np.float32))
    want, magnitude = gemm_reference(case, a, b, c0, alpha, beta)
    ta_, tb_, tc = (nl.from_numpy(x, t) for x, t in ((a, a_tiles), (b, b_tiles), (c0, c_tiles)))
    with rt.on(kind):
        got = nl.ops.gemm(ta_, tb_, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, out=tc,
                          ndim=len(dims["k"]), batch_ndim=len(dims["b"]))
        rt.wait()
    assert_close(got.to_numpy(), want, magnitude, ulps=gemm_ulps(case),
                 what=(kind, case, alpha, beta))


# ---- element-wise rows, broadcasts and the axis-wise families on two workers ----------
def run_op_on(rt, kind, name, arrays, tiles, scalars):
    """Op ``name`` on worker ``kind``: its output as numpy (an RW output starts as given)."""
    op = OPS[name]
    tensors = {k: nl.from_numpy(v, tiles) for k, v in arrays.items()}
    with rt.on(kind):
        out = getattr(nl.ops, name)(**tensors, **scalars)
        rt.wait()
    out = out if out is not None else tensors[op.output]
    if kind != "cpu":   # it ran there: the device holds the output (nothing else
        # would bring it there; StarPU may also have written it back to RAM while idle)
        node = memory_node(rt, kind)
        assert all(lib.starpu_data_is_on_node(h, node) for h in handles(out))
    return out.to_numpy()


def element_wise_arrays(rng, name, shape, beta):
    op = OPS[name]
    arrays = {i: rng.standard_normal(shape).astype(np.float32) * 2 for i in op.inputs}
    if op.rw:   # the RW output's old value: NaN where beta == 0 must overwrite it unread
        arrays[op.output] = (np.full(shape, np.nan, np.float32) if beta == 0.0
                             else rng.standard_normal(shape).astype(np.float32))
    return arrays


def check_element_wise_on(kind, rt, name, arrays, tiles, scalars):
    """The op on the CPU and on the ``kind`` worker, each against float64 within the ulps of
    its formula's terms (tests/ops/elementwise_ref.py): the CPU's exp is nl_expf, OpenCL's
    and CUDA's their own, and where the formula cancels (gelu' near x = −0.75) they differ
    by a few ulps of the terms, not of the result."""
    want, magnitude, ulps = reference(name, arrays, scalars)
    for where in ("cpu", kind):
        got = run_op_on(rt, where, name, dict(arrays), tiles, scalars)
        assert_close(got, want, magnitude, ulps=ulps, what=(where, name, tiles, scalars))


def check_broadcasts_on(kind, rt, rng, data, shape, tiles):
    """add/mul along a slice and a fiber (an axis drawn from ``data``) on the CPU and on the
    ``kind`` worker, each against float64: y = α·b + β·x (3 roundings of the terms), b·x (1)."""
    axis = data.draw(st.integers(0, len(shape) - 1))
    alpha, beta = data.draw(st.floats(-2, 2)), data.draw(st.sampled_from([0.0, 1.0, -0.5]))
    cut = lambda t: t[:axis] + t[axis + 1:]   # noqa: E731
    arrays = {"x": rng.standard_normal(shape).astype(np.float32),
              "s": rng.standard_normal(cut(shape) or (1,)).astype(np.float32),
              "f": rng.standard_normal((shape[axis],)).astype(np.float32)}
    if len(shape) == 1:   # a slice of a vector is a scalar: no slice ops then
        arrays.pop("s")
    layout = {"x": tiles, "s": cut(tiles) or (1,), "f": (tiles[axis],)}
    ops = [("add_fiber", "f", (alpha, beta)), ("mul_fiber", "f", ())]
    if "s" in arrays:
        ops += [("add_slice", "s", (alpha, beta)), ("mul_slice", "s", ())]
    x = arrays["x"].astype(np.float64)
    a32, b32 = np.float64(np.float32(alpha)), np.float64(np.float32(beta))
    for name, v, scalars in ops:
        cpu, acc = on_cpu_and(kind, rt, arrays, layout, lambda t, name=name, v=v, scalars=scalars:
                             [getattr(nl.ops, name)(t[v], t["x"], axis, *scalars)])
        b = arrays[v].astype(np.float64)
        b = b.reshape([-1 if d == axis else 1 for d in range(len(shape))]) if v == "f" \
            else np.expand_dims(b, axis)
        if scalars:   # y = α·b + β·x: two products and a sum, relative to the terms
            want, mag, ulps = a32 * b + b32 * x, abs(a32 * b) + abs(b32 * x), 3
        else:         # y = b·x: one product
            want, mag, ulps = b * x, abs(b * x), 1
        for where, got in (("cpu", cpu[0]), (kind, acc[0])):
            assert_close(got, want, mag, ulps=ulps, what=(where, name, shape, tiles, axis))


# The axis-wise families: both sides sum in double (the OpenCL kernels where the device has
# fp64, as PoCL and most GPUs do), in different orders, and round once: results agree to
# an ulp or two of the terms' magnitude, plus one rounding per float32 partial sum added
# between tiles (``partial_ulps``), on each side. Any wrong index, lane or reduction step
# gives errors of the order of the magnitude itself.
def partial_ulps(shape, tiles, axes) -> float:
    """Both workers' roundings for a sum over ``axes``: a few each, and one per tile whose
    float32 partial result is added to the output."""
    return 2 * (4 + n_tiles(shape, tiles, axes))


def fiber_view(v, a, ndim):
    return v.reshape([-1 if d == a else 1 for d in range(ndim)])


def check_reductions_on(kind, rt, rng, shape, tiles, axis, alpha, beta):
    a = axis % len(shape)
    sshape, stiles = drop(shape, a), drop(tiles, a)
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)

    def old(sh):   # the outputs' old values: NaN where beta == 0 must overwrite them unread
        return (np.full(sh, np.nan, np.float32) if beta == 0.0
                else rng.standard_normal(sh).astype(np.float32))

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

    cpu, got = on_cpu_and(kind, rt, arrays, layout, run)
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
    others = [d for d in range(len(shape)) if d != a]
    summed = [[a], [a], [a], None, others, list(range(len(shape)))]
    for name, want, have, mag, axes in zip(names, cpu, got, mags, summed):
        assert np.isfinite(have).all(), (name, shape, tiles, axis)
        if mag is None:   # max is exact
            assert np.array_equal(have, want), (name, shape, tiles, axis)
        else:
            assert_close(have, want, mag, ulps=partial_ulps(shape, tiles, axes),
                         what=(name, shape, tiles, axis, alpha, beta))


def check_softmax_on(kind, rt, rng, shape, tiles, axis, scale, in_place, accumulate):
    a = axis % len(shape)
    x = masked_input(rng, shape, a, scale)
    # a y whose sum is off 1 (by 1e-3, to tell): the backward divides by Σ y, so that dx
    # still sums to 0 along the axis (kernels/cpu/norm.c), on the device too
    y = (softmax_ref(x, axis) * (1 + 1e-3)).astype(np.float32)
    arrays = {"x": x, "y": y, "dy": rng.standard_normal(shape).astype(np.float32),
              "dx": rng.standard_normal(shape).astype(np.float32)}

    def run(t):
        fwd = nl.ops.softmax(t["x"], axis, out=t["x"] if in_place else None)
        bwd = nl.ops.softmax_backward(t["y"], t["dy"], axis, t["dx"] if accumulate else None)
        return [fwd, bwd]

    cpu, got = on_cpu_and(kind, rt, arrays, dict.fromkeys(arrays, tiles), run)
    # softmax: each side's exp is a few ulp off exp (the CPU's nl_expf, OpenCL's exp), and
    # x − max carries its rounding into exp (softmax_magnitude)
    ulps = partial_ulps(shape, tiles, [a])
    assert_close(got[0], cpu[0], softmax_magnitude(x, a), ulps=ulps + 8,
                 what=("softmax", shape, tiles, axis))
    y64, dy64 = y.astype(np.float64), arrays["dy"].astype(np.float64)
    s = np.expand_dims((y64 * dy64).sum(a) / y64.sum(a), a)
    mag = abs(y64) * (abs(dy64) + abs(s)) + (abs(arrays["dx"]) if accumulate else 0)
    assert_close(got[1], cpu[1], mag, ulps=ulps, what=("softmax_backward", shape, tiles, axis))
    if not accumulate:   # (a fiber of one unmasked value: dx is 0 but for rounding)
        dx, floor = got[1].astype(np.float64), 1e-12 * abs(y64 * dy64).sum(a)
        assert np.all(abs(dx.sum(a)) <= 1e-6 * abs(dx).sum(a) + floor), (shape, tiles, axis)


def check_layer_norm_on(kind, rt, rng, shape, tiles, axis, offset, in_place, given_grads):
    a, nd = axis % len(shape), len(shape)
    x = (rng.standard_normal(shape) * 2 + offset).astype(np.float32)
    gamma = (rng.standard_normal(shape[a]) * 0.5 + 1).astype(np.float32)
    bias = rng.standard_normal(shape[a]).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    ft, st_ = (tiles[a],), drop(tiles, a)
    # the forward's mean and inv_std, computed once (on the CPU) and given to both sides
    _, mean, inv_std = nl.ops.layer_norm(nl.from_numpy(x, tiles), nl.from_numpy(gamma, ft),
                                         nl.from_numpy(bias, ft), axis)
    arrays = {"x": x, "x2": x, "gamma": gamma, "bias": bias, "dy": dy,
              "mean": mean.to_numpy(), "inv_std": inv_std.to_numpy(),
              "dx": rng.standard_normal(shape).astype(np.float32),
              "dgamma": rng.standard_normal(shape[a]).astype(np.float32),
              "dbeta": rng.standard_normal(shape[a]).astype(np.float32)}
    layout = {**dict.fromkeys(("x", "x2", "dy", "dx"), tiles), "mean": st_, "inv_std": st_,
              **dict.fromkeys(("gamma", "bias", "dgamma", "dbeta"), ft)}

    def run(t):
        y, mu, r = nl.ops.layer_norm(t["x"], t["gamma"], t["bias"], axis,
                                     out=t["x"] if in_place else None)
        grads = {k: t[k] for k in ("dx", "dgamma", "dbeta") if given_grads}
        dx, dg, db = nl.ops.layer_norm_backward(t["x2"], t["dy"], t["gamma"], t["mean"],
                                                t["inv_std"], axis, **grads)
        return [y, mu, r, dx, dg, db]

    cpu, got = on_cpu_and(kind, rt, arrays, layout, run)
    x64 = x.astype(np.float64)
    r = np.expand_dims(arrays["inv_std"].astype(np.float64), a)
    xmag = (abs(x64) + abs(np.expand_dims(arrays["mean"], a))) * r
    g = abs(dy * fiber_view(gamma, a, nd))
    mean_a = lambda v: v.mean(a, keepdims=True)  # noqa: E731
    start = {k: abs(arrays[k]) if given_grads else 0 for k in ("dx", "dgamma", "dbeta")}
    mags = [xmag * abs(fiber_view(gamma, a, nd)) + abs(fiber_view(bias, a, nd)),
            abs(x64).mean(a), abs(arrays["inv_std"]),
            r * (g + mean_a(g) + xmag * mean_a(g * xmag)) + start["dx"],
            fiber_sum(abs(dy) * xmag, a) + start["dgamma"],
            fiber_sum(abs(dy), a) + start["dbeta"]]
    names = ["y", "mean", "inv_std", "dx", "dgamma", "dbeta"]
    others = [d for d in range(nd) if d != a]
    summed = [[a], [a], [a], [a], others, others]
    for name, want, have, mag, axes in zip(names, cpu, got, mags, summed):
        assert_close(have, want, mag, ulps=partial_ulps(shape, tiles, axes),
                     what=(name, shape, tiles, axis, offset))
