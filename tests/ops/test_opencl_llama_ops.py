"""The Llama's ops on the OpenCL worker (PoCL here) against the same ops on the CPU, over
random shapes and tilings: RMS norm and its backward (generated reductions: work-group trees
along the axis), rotary positions, SiLU's gate backward. Every input is drawn from the test's
own seed. No OpenCL device fails these tests loudly: they never skip."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import nntile_lab as nl
from tests.ops.test_reduce import axis_case, drop, fiber_sum
from tests.ops.test_rope import rope_case, rotated_magnitude
from tests.ops.two_workers import on_cpu_and, partial_ulps
from tests.strategies import seeds, shape_and_tiles
from tests.tolerance import assert_close

SEEDS = seeds()


def _view(v, a, ndim):
    return v.reshape([-1 if d == a else 1 for d in range(ndim)])


@given(axis_case(), SEEDS, st.booleans(), st.booleans())
def test_rms_norm_on_opencl_matches_cpu(ocl, case, seed, in_place, given_grads):
    shape, tiles, axis = case
    a, nd = axis % len(shape), len(shape)
    rng = np.random.default_rng(seed)
    x, dy, dx0 = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    w, dw0 = ((rng.standard_normal(shape[a]) * 0.5 + 1).astype(np.float32) for _ in range(2))
    ft, st_ = (tiles[a],), drop(tiles, a)
    # the forward's inv_rms, computed once (on the CPU) and given to both backwards
    _, inv_rms = nl.ops.rms_norm(nl.from_numpy(x, tiles), nl.from_numpy(w, ft), axis)
    arrays = {"x": x, "x2": x, "w": w, "dy": dy, "inv_rms": inv_rms.to_numpy(), "dx": dx0,
              "dw": dw0}
    layout = {**dict.fromkeys(("x", "x2", "dy", "dx"), tiles), "inv_rms": st_,
              **dict.fromkeys(("w", "dw"), ft)}

    def run(t):
        y, r = nl.ops.rms_norm(t["x"], t["w"], axis, out=t["x"] if in_place else None)
        grads = {"dx": t["dx"], "dweight": t["dw"]} if given_grads else {}
        dx, dw = nl.ops.rms_norm_backward(t["x2"], t["dy"], t["w"], t["inv_rms"], axis, **grads)
        return [y, r, dx, dw]

    cpu, got = on_cpu_and("opencl", ocl, arrays, layout, run)
    r = np.expand_dims(arrays["inv_rms"].astype(np.float64), a)
    xhat, g = abs(x.astype(np.float64)) * r, abs(dy * _view(w, a, nd))
    mags = [xhat * abs(_view(w, a, nd)), abs(arrays["inv_rms"]),
            r * (g + xhat * (g * xhat).mean(a, keepdims=True))
            + (abs(dx0) if given_grads else 0),
            fiber_sum(abs(dy) * xhat, a) + (abs(dw0) if given_grads else 0)]
    # the sums' order differs between the work-group trees and the CPU's lanes (double on
    # both), and float32 partial sums between tiles
    others = [d for d in range(nd) if d != a]
    for name, want, have, mag, axes in zip(("y", "inv_rms", "dx", "dw"), cpu, got, mags,
                                           ([a], [a], [a], others)):
        assert_close(have, want, mag, ulps=partial_ulps(shape, tiles, axes),
                     what=(name, shape, tiles, axis))


@given(rope_case(), SEEDS)
def test_rope_on_opencl_matches_cpu(ocl, case, seed):
    shape, tiles, positions, theta = case
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    cos, sin = nl.ops.rope_tables(positions, shape[-1], theta)
    tt = (tiles[-2], shape[-1] // 2)
    arrays = {"x": x, "dy": dy, "cos": cos, "sin": sin}
    layout = {"x": tiles, "dy": tiles, "cos": tt, "sin": tt}

    def run(t):
        return [nl.ops.rope(t["x"], t["cos"], t["sin"]),
                nl.ops.rope_backward(t["dy"], t["cos"], t["sin"], dx=t["dy"])]

    cpu, got = on_cpu_and("opencl", ocl, arrays, layout, run)
    for v, want, have in zip((x, dy), cpu, got):
        # the same products; only whether a device fuses a multiply and an add differs
        assert_close(have, want, rotated_magnitude(v, cos, sin), ulps=2, what=(shape, tiles))


@given(shape_and_tiles(), SEEDS, st.sampled_from([0.0, 0.5]))
def test_silu_gate_on_opencl_matches_cpu(ocl, case, seed, beta):
    shape, tiles = case
    rng = np.random.default_rng(seed)
    arrays = {k: (rng.standard_normal(shape) * 3).astype(np.float32)
              for k in ("g", "u", "dy", "dg", "du")}

    def run(t):
        y = nl.ops.silu_gate(t["g"], t["u"])
        dg, du = nl.ops.silu_gate_backward(t["g"], t["u"], t["dy"], t["dg"], t["du"], beta)
        return [y, dg, du]

    cpu, got = on_cpu_and("opencl", ocl, arrays, dict.fromkeys(arrays, tiles), run)
    g, u, dy = (arrays[k].astype(np.float64) for k in ("g", "u", "dy"))
    # the CPU's exp (≤ 1.5 ulp) against OpenCL's, a division and a few products
    mags = [abs(g * u), abs(dy * u) * (1 + abs(g)) + beta * abs(arrays["dg"]),
            abs(dy * g) + beta * abs(arrays["du"])]
    for want, have, mag in zip(cpu, got, mags):
        assert_close(have, want, mag, ulps=16, what=(shape, tiles, beta))
