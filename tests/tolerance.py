"""The one tolerance of every kernel-parity test (CPU, OpenCL, CUDA-emulated kernels against
numpy in float64, or one worker against another).

Why element-wise against a magnitude. Floating-point error analysis (Higham, *Accuracy and
Stability of Numerical Algorithms*, ch. 2–4) bounds what a float32 kernel may differ from the
exact result by the *terms* it combines, not by the result:

    |computed − exact| ≤ k · u · magnitude,    magnitude = Σ |term_i|

where u = 2⁻²⁴ is float32's unit roundoff and k counts the roundings on the longest path
(a dot product of length n: k = n; an exp, tanh or division: a few ulps of its value, and
its argument's rounding times the function's condition number). A result that cancels
(αx + βy with αx ≈ −βy; GELU's derivative near x = −0.75, where its two terms nearly cancel)
has a large magnitude and a small value: a tolerance relative to the value blames float32
rounding on the kernel (the flaky ``gelu_backward`` parity: 4.6e-6 relative on a value of
−2.6e-3 whose terms were 0.23 each, a fifth of an ulp of them). So each test passes the
magnitude its op's formula gives (``magnitude`` functions beside the references) and the
number of roundings (``ulps``); values below float32's normal range get an absolute floor
(underflow is absolute, not relative, error). A wrong index, lane, tile or formula gives
errors of the order of the magnitude itself — millions of ulps — so the bound still catches
every bug, element by element, wherever it sits.

``assert_close`` is that check: element-wise, NaN where the reference is NaN and nowhere
else, infinities equal, and a failure names the worst element (index, values, error,
bound) so that a shrunk hypothesis example says what went wrong.

``rel_err`` and ``cond_err`` (norm-wise) are for what is no kernel's output: losses and
gradients of whole models, trained weights against PyTorch, where the error has been through
thousands of kernels.
"""
from __future__ import annotations

import numpy as np

U32 = 2.0 ** -24     # float32's unit roundoff (half an ulp of 1)
U_BF16 = 2.0 ** -8   # bfloat16's
TINY32 = 2.0 ** -126  # float32's smallest normal: below it errors are absolute


def assert_close(got, want, magnitude=None, *, ulps: float, unit: float = U32,
                 floor: float | None = None, what: object = "") -> None:
    """Assert ``|got − want| ≤ ulps · unit · magnitude + floor`` element by element.

    ``want``: the reference (float64 numpy, or another worker's result); ``magnitude``: the
    sum of the absolute values of the terms behind each element (default ``|want|``: an op
    with no cancellation), broadcast against ``want``; ``ulps``: roundings the op's error
    analysis allows (both sides' when two float32 kernels are compared); ``floor``: the
    absolute part (default ``ulps`` units of float32's smallest normal, for underflow);
    ``what``: printed with a failure (the hypothesis case). NaN must sit where ``want`` has
    NaN, ±inf where it has ±inf."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    if (nan_got != nan_want).any():
        i = np.unravel_index(np.argmax(nan_got != nan_want), got.shape)
        raise AssertionError(f"{what}: NaN mismatch at {i}: got {got[i]}, want {want[i]} "
                             f"({int(nan_got.sum())} NaN got, {int(nan_want.sum())} wanted)")
    inf = np.isinf(want) | np.isinf(got)
    if (got[inf] != want[inf]).any():
        i = tuple(np.argwhere(inf & (got != want))[0])
        raise AssertionError(f"{what}: infinity mismatch at {i}: got {got[i]}, want {want[i]}")
    ok = ~(nan_want | inf)
    mag = np.abs(want) if magnitude is None else np.abs(np.asarray(magnitude, np.float64))
    mag = np.broadcast_to(mag, want.shape)
    bound = ulps * unit * mag + (ulps * TINY32 if floor is None else floor)
    err = np.where(ok, np.abs(got - want), 0.0)
    excess = np.where(ok, err - bound, -np.inf)
    if excess.size and excess.max() > 0:
        i = np.unravel_index(np.argmax(excess / np.maximum(bound, 1e-300)), want.shape)
        n_bad = int((excess > 0).sum())
        raise AssertionError(
            f"{what}: {n_bad} of {want.size} elements beyond {ulps:g} ulps of their magnitude;"
            f" worst at {tuple(int(j) for j in i)}: got {got[i]!r}, want {want[i]!r}, error "
            f"{err[i]:.3g} > bound {bound[i]:.3g} (magnitude {mag[i]:.3g}, "
            f"{err[i] / (unit * mag[i]) if mag[i] else np.inf:.3g} ulps)")


def rel_err(got, want) -> float:
    """Norm-wise relative error ‖got − want‖ / ‖want‖ against a float64 reference: for
    whole-model results (losses, trained weights), not for one kernel's output."""
    want = np.asarray(want, np.float64)
    den = np.linalg.norm(want)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / (den if den else 1.0))


def cond_err(got, want, magnitude) -> float:
    """‖got − want‖ / ‖magnitude‖ (``magnitude``: the terms behind ``want`` made positive),
    norm-wise: for whole-model results whose terms cancel (a model's gradients against
    PyTorch's), never for one kernel's output (tests/test_determinism.py refuses it in
    tests/ops and tests/kernels: ``assert_close`` there)."""
    den = np.linalg.norm(np.asarray(magnitude, np.float64))
    diff = np.asarray(got, np.float64) - np.asarray(want, np.float64)
    return float(np.linalg.norm(diff) / (den if den else 1.0))


def dot_ulps(n: int) -> float:
    """Roundings of a length-``n`` dot product or sum, plus the scaling and accumulation
    around it (γ_n of the error analysis, with 2 more): the worst case, not the typical √n."""
    return float(n + 2)
