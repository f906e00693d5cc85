"""Reductions and broadcasts along one axis of a tiled tensor.

Each tile of ``x`` is viewed as (m, k, n) in C order: k is its extent along
``axis``, m the product of the tile's dimensions before it, n after it, so
element (i, j, l) sits at i·k·n + j·n + l. A **slice** is a tensor with x's
shape and tile shape minus ``axis`` (one value per (i, l)); a **fiber** is the
1-D tensor of shape ``(x.shape[axis],)`` with tile ``(x.tile_shape[axis],)``
(one value per j). ``axis`` may be negative.

A reduction over an axis split into several tiles chains one task per tile into
the same output tile: the first applies β (β = 0 overwrites without reading),
the following ones accumulate, always in the same order (deterministic sums).
"""
from __future__ import annotations

from numbers import Integral

from nntile_lab._lib import lib
from nntile_lab.errors import described
from nntile_lab.ops._common import check, need_dtype, no_alias
from nntile_lab.tensor import TensorTraits, TiledTensor, empty
from nntile_lab.tiling import TileStep, plan  # noqa: F401  (ops.reduce.plan)


def norm_axis(x: TiledTensor, axis) -> int:
    """``axis`` as a non-negative index of x's dimensions."""
    if not isinstance(axis, Integral) or isinstance(axis, bool):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis={axis} is out of range for {x!r} with {x.ndim} dimension(s): "
                         f"use {-x.ndim} … {x.ndim - 1}")
    return int(axis) % x.ndim


def slice_traits(x: TiledTensor, axis: int) -> TensorTraits:
    """Shape and tiles of a slice of x along ``axis`` (x without that axis)."""
    drop = lambda t: t[:axis] + t[axis + 1:]  # noqa: E731
    return TensorTraits(drop(x.shape), drop(x.tile_shape))


def fiber_traits(x: TiledTensor, axis: int) -> TensorTraits:
    return TensorTraits((x.shape[axis],), (x.tile_shape[axis],))


def check_operand(t: TiledTensor, want: TensorTraits, name: str, what) -> None:
    """``t`` must be a float32 tensor with the shape and tiles ``want`` (``what``
    names what it should be: a string, or a function making it for the error)."""
    if not isinstance(t, TiledTensor):
        raise TypeError(f"{name} must be a TiledTensor ({described(what)}), got "
                        f"{type(t).__name__}")
    need_dtype(t, "float32", name)
    if t.traits != want:
        raise ValueError(f"{name} is {t!r}, but {described(what)} must have shape "
                         f"{want.shape} with tile_shape {want.tile_shape}")


def check_slice(s: TiledTensor, x: TiledTensor, axis: int, name: str) -> None:
    check_operand(s, slice_traits(x, axis), name,
                  lambda: f"a slice of x {x!r} along axis {axis} (x without that axis)")


def check_fiber(f: TiledTensor, x: TiledTensor, axis: int, name: str) -> None:
    check_operand(f, fiber_traits(x, axis), name,
                  lambda: f"a fiber of x {x!r} along axis {axis} (x.shape[{axis}] long, "
                          "tiled like that axis)")


def new_or_checked(t: TiledTensor | None, want: TensorTraits, beta: float, name: str,
                   check_fn) -> TiledTensor:
    """An output: ``t`` checked by ``check_fn(t)``, or a new tensor when None (which
    only an overwriting β = 0 can fill)."""
    if t is None:
        if beta != 0:
            raise ValueError(f"beta={beta} accumulates into an existing {name}: pass {name}=")
        return empty(want.shape, want.tile_shape)
    check_fn(t)
    return t


def slice_out(s: TiledTensor | None, x: TiledTensor, axis: int, name: str = "out",
              beta: float = 0.0) -> TiledTensor:
    """A slice of x along ``axis`` to write: ``s`` checked, or a new one."""
    return new_or_checked(s, slice_traits(x, axis), beta, name,
                          lambda t: check_slice(t, x, axis, name))


def fiber_out(f: TiledTensor | None, x: TiledTensor, axis: int, name: str = "out",
              beta: float = 0.0) -> TiledTensor:
    """A fiber of x along ``axis`` to write: ``f`` checked, or a new one."""
    return new_or_checked(f, fiber_traits(x, axis), beta, name,
                          lambda t: check_fiber(t, x, axis, name))


def like_out(t: TiledTensor | None, x: TiledTensor, name: str, xname: str = "x") -> TiledTensor:
    """An output shaped and tiled like x: ``t`` checked, or a new one."""
    return new_or_checked(t, x.traits, 0.0, name,
                          lambda t: check_operand(t, x.traits, name, f"{name} (like {xname} "
                                                  f"{x!r})"))


def tensor_in(x: TiledTensor, name: str = "x") -> None:
    if not isinstance(x, TiledTensor):
        raise TypeError(f"{name} must be a TiledTensor, got {type(x).__name__}")
    need_dtype(x, "float32", name)


def _reduce_slice(submit, x, axis, out, alpha, beta):
    tensor_in(x)
    axis = norm_axis(x, axis)
    out = slice_out(out, x, axis, "out", beta)
    no_alias(submit.__name__.removeprefix("nl_submit_"), {"out": out}, {"x": x})
    hx, ho = x.handles, out.handles
    for t in plan(x.traits, axis):
        check(submit(hx[t.x], ho[t.s], t.m, t.k, t.n, alpha, beta if t.first else 1.0))
    return out


def sum_slice(x: TiledTensor, axis: int, out: TiledTensor | None = None, alpha: float = 1.0,
              beta: float = 0.0) -> TiledTensor:
    """out[i,l] = α·Σ_j x[i,j,l] + β·out[i,l]  (out: a slice of x along ``axis``)."""
    return _reduce_slice(lib.nl_submit_sum_slice, x, axis, out, alpha, beta)


def sumsq_slice(x: TiledTensor, axis: int, out: TiledTensor | None = None, alpha: float = 1.0,
                beta: float = 0.0) -> TiledTensor:
    """out[i,l] = α·Σ_j x[i,j,l]² + β·out[i,l]."""
    return _reduce_slice(lib.nl_submit_sumsq_slice, x, axis, out, alpha, beta)


def sumprod_slice(a: TiledTensor, b: TiledTensor, axis: int, out: TiledTensor | None = None,
                  alpha: float = 1.0, beta: float = 0.0) -> TiledTensor:
    """out[i,l] = α·Σ_j a[i,j,l]·b[i,j,l] + β·out[i,l]  (a and b share shape and tiles)."""
    tensor_in(a, "a")
    axis = norm_axis(a, axis)
    check_operand(b, a.traits, "b", f"b (like a {a!r})")
    out = slice_out(out, a, axis, "out", beta)
    no_alias("sumprod_slice", {"out": out}, {"a": a, "b": b})
    ha, hb, ho = a.handles, b.handles, out.handles
    for t in plan(a.traits, axis):
        check(lib.nl_submit_sumprod_slice(ha[t.x], hb[t.x], ho[t.s], t.m, t.k, t.n, alpha,
                                          beta if t.first else 1.0))
    return out


def max_slice(x: TiledTensor, axis: int, out: TiledTensor | None = None) -> TiledTensor:
    """out[i,l] = max_j x[i,j,l]  (-inf entries allowed; a NaN propagates)."""
    tensor_in(x)
    axis = norm_axis(x, axis)
    out = slice_out(out, x, axis)
    no_alias("max_slice", {"out": out}, {"x": x})
    hx, ho = x.handles, out.handles
    for t in plan(x.traits, axis):
        check(lib.nl_submit_max_slice(hx[t.x], ho[t.s], t.m, t.k, t.n, not t.first))
    return out


def sum_fiber(x: TiledTensor, axis: int, out: TiledTensor | None = None, alpha: float = 1.0,
              beta: float = 0.0) -> TiledTensor:
    """out[j] = α·Σ_{i,l} x[i,j,l] + β·out[j]  (out: a fiber of x along ``axis``; the
    bias gradient). Each fiber tile sums its x tiles in C order of x's grid."""
    tensor_in(x)
    axis = norm_axis(x, axis)
    out = fiber_out(out, x, axis, "out", beta)
    no_alias("sum_fiber", {"out": out}, {"x": x})
    hx, ho = x.handles, out.handles
    for t in plan(x.traits, axis):
        check(lib.nl_submit_sum_fiber(hx[t.x], ho[t.f], t.m, t.k, t.n, alpha,
                                      beta if t.fiber_first else 1.0))
    return out


def sumsq_all(x: TiledTensor, out: TiledTensor | None = None, alpha: float = 1.0,
              beta: float = 0.0) -> TiledTensor:
    """out[0] = α·Σ x² + β·out[0]  (out: shape (1,)). With β = 1 it accumulates across
    calls: the squared global norm of several tensors (gradient clipping)."""
    tensor_in(x)
    if out is None:
        if beta != 0:
            raise ValueError(f"beta={beta} accumulates into an existing out: pass out=")
        out = empty((1,))
    else:
        check_operand(out, TensorTraits((1,)), "out", "the result of sumsq_all")
        no_alias("sumsq_all", {"out": out}, {"x": x})
    hx, ho, sizes = x.handles, out.handles, x.traits.tile_sizes
    for i in range(x.ntiles):
        check(lib.nl_submit_sumsq_all(hx[i], ho[0], sizes[i], alpha, beta if i == 0 else 1.0))
    return out


def _broadcast(submit, v: TiledTensor, x: TiledTensor, axis, over: str, *args) -> TiledTensor:
    """One task per tile of x, reading the slice (``over="slice"``) or fiber tile of
    ``v`` that broadcasts over it; x is updated in place and returned."""
    tensor_in(x)
    axis = norm_axis(x, axis)
    (check_slice if over == "slice" else check_fiber)(v, x, axis, over[0])
    no_alias(submit.__name__.removeprefix("nl_submit_"), {"x": x}, {over[0]: v})
    hv, hx = v.handles, x.handles
    for t in plan(x.traits, axis):
        check(submit(hv[t.s if over == "slice" else t.f], hx[t.x], t.m, t.k, t.n, *args))
    return x


def add_slice(s: TiledTensor, x: TiledTensor, axis: int, alpha: float = 1.0,
              beta: float = 1.0) -> TiledTensor:
    """x[i,j,l] = α·s[i,l] + β·x[i,j,l], in place (β = 0 overwrites x). Returns x."""
    return _broadcast(lib.nl_submit_add_slice, s, x, axis, "slice", alpha, beta)


def mul_slice(s: TiledTensor, x: TiledTensor, axis: int) -> TiledTensor:
    """x[i,j,l] = s[i,l]·x[i,j,l], in place. Returns x."""
    return _broadcast(lib.nl_submit_mul_slice, s, x, axis, "slice")


def add_fiber(f: TiledTensor, x: TiledTensor, axis: int, alpha: float = 1.0,
              beta: float = 1.0) -> TiledTensor:
    """x[i,j,l] = α·f[j] + β·x[i,j,l], in place (bias add; β = 0 overwrites x). Returns x."""
    return _broadcast(lib.nl_submit_add_fiber, f, x, axis, "fiber", alpha, beta)


def mul_fiber(f: TiledTensor, x: TiledTensor, axis: int) -> TiledTensor:
    """x[i,j,l] = f[j]·x[i,j,l], in place. Returns x."""
    return _broadcast(lib.nl_submit_mul_fiber, f, x, axis, "fiber")
