"""The element-wise rows in float64: each op's exact value, the magnitude its float32 error is
relative to (the sum of its formula's terms made positive, with each transcendental's
argument error times its condition number) and the roundings it may take (ulps), for
``tests.tolerance.assert_close``. One place for the CPU, OpenCL and CUDA parity tests.

The kernels' formulas (kernels/cpu/gelu.h, elementwise.c; kernels/opencl/elementwise.cl):
  gelu(x)  = x·s,  s = σ(2u), q = 1 − s, u = √(2/π)·(x + 0.044715·x³)
  gelu'(x) = s + T,  T = 2x·s·q·√(2/π)·(1 + 3·0.044715·x²)   (s + T cancels near x = −0.75)
  silu(x)  = x·σ(x),  silu'(x) = σ(x)·(1 + x·(1 − σ(x)))      (cancels near x = −1.28)
  silu_gate(g, u) = g·σ(g)·u                                 (kernels/codelets.py's formula)
u carries a few roundings relative to U = √(2/π)·(|x| + 0.044715·|x|³); through σ(2u)
(derivative 2·s·q) that moves s by 2·s·q·U ulps and T by about 2·|T|·U ulps. exp costs
≤ 1.5 ulp (nl_expf, kernels/cpu/fastexp.h) or ≤ 3 (OpenCL's exp, its full profile), the
division and products one each.
"""
from __future__ import annotations

import numpy as np

C1, C = np.sqrt(2 / np.pi), 0.044715


def _sigmoid(z):
    with np.errstate(over="ignore"):   # exp(1e4) = inf: σ = 0, as it should be
        return 1 / (1 + np.exp(-z))


def gelu_parts(x):
    """(s, q, U, T) of the GELU formulas above, in float64."""
    x = np.asarray(x, np.float64)
    u = C1 * (x + C * x**3)
    s = _sigmoid(2 * u)
    q = _sigmoid(-2 * u)
    big_u = C1 * (abs(x) + C * abs(x)**3)
    t = 2 * x * s * q * C1 * (1 + 3 * C * x**2)
    return s, q, big_u, t


def gelu(x):
    s, q, big_u, _ = gelu_parts(x)
    x = np.asarray(x, np.float64)
    return x * s, abs(x) * (s + 2 * s * q * big_u)


def gelu_derivative(x):
    s, q, big_u, t = gelu_parts(x)
    return s + t, s + abs(t) + 2 * big_u * (s * q + abs(t))


def silu_parts(x):
    x = np.asarray(x, np.float64)
    return _sigmoid(x), _sigmoid(-x)


def _accumulate(d, mag, arrays, scalars, out):
    """``d + β·old`` (β = 0: the old value is not read, NaN included) and its magnitude."""
    beta = np.float64(np.float32(scalars.get("beta", 0.0)))
    if beta == 0:
        return d, mag
    old = np.asarray(arrays[out], np.float64)
    return d + beta * old, mag + abs(beta * old)


def reference(name: str, arrays: dict, scalars: dict):
    """``(want, magnitude, ulps)`` of element-wise op ``name`` on float32 ``arrays`` (its
    inputs, and its RW output's old value) and ``scalars`` (rounded to float32 as the
    kernels take them)."""
    a = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    alpha = np.float64(np.float32(scalars.get("alpha", 1.0)))
    if name == "add":           # y = α·x + β·y: two products and a sum
        want, mag = _accumulate(alpha * a["x"], abs(alpha * a["x"]), a, scalars, "y")
        return want, mag, 3
    if name == "scale":
        return alpha * a["x"], abs(alpha * a["x"]), 1
    if name == "mul":
        v = alpha * a["a"] * a["b"]
        return v, abs(v), 2
    if name == "relu":
        return np.maximum(a["x"], 0), abs(a["x"]), 0
    if name == "relu_backward":
        d = np.where(a["x"] > 0, a["dy"], 0.0)
        want, mag = _accumulate(d, abs(d), a, scalars, "dx")
        return want, mag, 2
    if name == "gelu":
        want, mag = gelu(a["x"])
        return want, mag, 12
    if name == "gelu_backward":
        d, mag_d = gelu_derivative(a["x"])
        want, mag = _accumulate(a["dy"] * d, abs(a["dy"]) * mag_d, a, scalars, "dx")
        return want, mag, 16
    if name == "silu":
        s, _ = silu_parts(a["x"])
        return a["x"] * s, abs(a["x"]) * s, 8
    if name == "silu_backward":
        s, q = silu_parts(a["x"])
        d = a["dy"] * s * (1 + a["x"] * q)
        want, mag = _accumulate(d, abs(a["dy"]) * s * (1 + abs(a["x"]) * q), a, scalars, "dx")
        return want, mag, 10
    if name == "silu_gate":     # silu's σ and product, and one more product
        s, _ = silu_parts(a["g"])
        v = a["g"] * s * a["u"]
        return v, abs(v), 9
    raise KeyError(f"no float64 reference for element-wise op {name!r}: add it here")
