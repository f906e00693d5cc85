"""A dry run: a model's very forward and backward code on shape-only tensors.

Inside ``dry_run()`` the layers' ``ops`` are the stand-ins below: each computes its
result's shape, tiles and dtype and records the tasks the tiled op would submit — one per
tile op, in the same loops — with the tiles each reads and writes, its working set (bytes)
and its FLOPs. Tensors are ``MetaTensor``s: a tile counts as allocated from the first task
that writes it, and is released after the last task that uses it once its tensor is freed
(StarPU unregisters a tile when its last pending task ends); the runtime's own count
(``Runtime.reserve``) takes a tensor whole, from its creation to its free
(``DryRun.held_peak``). Nothing needs StarPU or the
compiled extension: the memory planner builds the model and runs a step here
(``nntile_lab.memory``), and the tests compare every number with a real run.

The stand-ins mirror ``nntile_lab.ops``: an op a layer calls needs a rule here (a missing
one is one clear error naming it), with its test in tests/nn/test_meta.py.
"""
from __future__ import annotations

import contextlib
import itertools
import math
from collections import Counter
from dataclasses import dataclass
from itertools import product

import numpy as np

from nntile_lab.nn import backend
from nntile_lab.nn.backend import BFLOAT16, F32
from nntile_lab.tiling import TensorTraits, plan

I64 = np.dtype(np.int64)


@contextlib.contextmanager
def dry_run(*, hints=frozenset(), priorities: bool = True):
    """Within: models are built and stepped on shape-only tensors; yields the ``DryRun``."""
    dry = DryRun(hints=hints, priorities=priorities)
    previous = backend.set_dry_run(dry)
    try:
        yield dry
    finally:
        backend.set_dry_run(previous)


class MetaTensor:
    """A tensor's shape, tiles and dtype, and nothing else (``TiledTensor``'s interface)."""

    dropped = False

    def __init__(self, dry: DryRun, traits: TensorTraits, dtype, base: MetaTensor | None = None):
        self.dry, self.traits, self.dtype, self._base = dry, traits, np.dtype(dtype), base
        if base is None:
            self.id = next(dry.ids)
            dry.stores[self.id] = _Store(self, dry.created())

    shape = property(lambda self: self.traits.shape)
    tile_shape = property(lambda self: self.traits.tile_shape)
    grid_shape = property(lambda self: self.traits.grid_shape)
    ndim = property(lambda self: self.traits.ndim)
    ntiles = property(lambda self: self.traits.ntiles)

    @property
    def storage(self) -> MetaTensor:
        t = self
        while t._base is not None:
            t = t._base
        return t

    def tile_bytes(self, i: int) -> int:
        return self.traits.tile_sizes[i] * self.dtype.itemsize

    def split_axis(self, axis: int, inner: int) -> MetaTensor:
        return MetaTensor(self.dry, self.traits.split_axis(axis, inner), self.dtype,
                          self.storage)

    def merge_axes(self, axis: int) -> MetaTensor:
        return MetaTensor(self.dry, self.traits.merge_axes(axis), self.dtype, self.storage)

    def free(self, *, wait: bool = False) -> None:
        self.dry.free(self.storage)

    def copy_from_numpy(self, array) -> MetaTensor:
        self.dry.written(self)
        return self

    def copy_rows_from_numpy(self, array, row0: int = 0) -> MetaTensor:
        self.dry.written(self)
        return self

    def to_numpy(self) -> np.ndarray:
        return np.zeros(self.shape, self.dtype)

    # memory hints change where a tile lives, never what is allocated: recorded, no more
    def wont_use(self, after=None) -> MetaTensor:
        self.dry.hints_given["wont_use"] += 1
        return self

    def prefetch(self, after=None) -> MetaTensor:
        self.dry.hints_given["prefetch"] += 1
        return self

    def invalidate(self) -> MetaTensor:
        self.dry.hints_given["invalidate"] += 1
        return self

    def __repr__(self) -> str:
        return f"MetaTensor(shape={self.shape}, tile_shape={self.tile_shape}, dtype={self.dtype})"


class _Store:
    """A tensor's tiles over the run: when the tensor was created (the runtime reserves it
    whole then), when each tile was first written and last used."""

    __slots__ = ("tensor", "created", "alloc", "last", "freed")

    def __init__(self, tensor: MetaTensor, created: int):
        self.tensor, self.created = tensor, created
        self.alloc = [None] * tensor.ntiles   # event number of the first write
        self.last = [None] * tensor.ntiles    # event number of the last use
        self.freed = None                     # event number of the free


class _Runtime:
    """What the policy asks of a runtime, in a dry run: hints, priorities, scopes."""

    alive = True
    generation = 0

    def __init__(self, hints, priorities: bool):
        self.hints, self.priorities = frozenset(hints), priorities
        self._scope = (0, -1, "")

    @contextlib.contextmanager
    def scope(self, *, layer=None, phase=None, priority=None):
        previous = self._scope
        self._scope = (previous[0] if priority is None else priority,
                       previous[1] if layer is None else layer,
                       previous[2] if phase is None else phase)
        try:
            yield self
        finally:
            self._scope = previous

    def check_alive(self) -> None:
        pass


@dataclass
class Task:
    op: str
    layer: int
    phase: str
    priority: int
    where: str          # the leaf (module path) that submitted it
    nbytes: int         # its working set: the bytes of the tiles it touches
    flops: float
    event: int          # its place in the run


# A run's dry run stops past this many tasks. Real specs submit thousands (the main job's
# planned run: 1 468; 8 layers at n_embd 1536: 5 220); a batch of 3 000 sequences in the
# default tiles is 507 000 tasks, 8 s and gigabytes of records to plan (a fuzzed --batch of
# 10^5 took the test process to 24 GiB), and a step StarPU would spend seconds submitting.
MAX_TASKS = 250_000


class TooManyTasks(RuntimeError):
    """The dry run passed ``MAX_TASKS`` (``memory`` names the spec and the fix)."""


class DryRun:
    """The record of a dry run: tasks, tile allocations and frees, marks."""

    def __init__(self, *, hints=frozenset(), priorities: bool = True):
        self.runtime = _Runtime(hints, priorities)
        self.ids = itertools.count()
        self.stores: dict[int, _Store] = {}
        self.tasks: list[Task] = []
        self.marks: dict[str, int] = {}
        self.hints_given: Counter = Counter()
        self.leaf = ""
        self._event = 0

    # ---- the backend's interface -----------------------------------------------------
    def op(self, name: str):
        rule = RULES.get(name)
        if rule is None:
            raise NotImplementedError(f"the dry run has no rule for ops.{name}: add one to "
                                      "nntile_lab/nn/meta.py (with its test in "
                                      "tests/nn/test_meta.py) so the planner can size it")
        return lambda *a, **kw: rule(self, *a, **kw)

    def empty(self, shape, tile_shape=None, dtype=np.float32) -> MetaTensor:
        return MetaTensor(self, TensorTraits(shape, tile_shape), dtype)

    def from_numpy(self, array, tile_shape=None) -> MetaTensor:
        return self.written(self.empty(array.shape, tile_shape, array.dtype))

    # ---- recording ---------------------------------------------------------------------
    def written(self, t: MetaTensor) -> MetaTensor:
        """Every tile of ``t`` written from numpy (no task): allocated now."""
        self._event += 1
        st = self.stores[t.storage.id]
        for i in range(len(st.alloc)):
            if st.alloc[i] is None:
                st.alloc[i] = self._event
            st.last[i] = self._event
        return t

    def task(self, op: str, reads, writes, flops: float) -> None:
        """One task: ``reads`` and ``writes`` are (tensor, tile) pairs (a read-write tile
        in ``writes``)."""
        if len(self.tasks) >= MAX_TASKS:
            raise TooManyTasks(f"more than {MAX_TASKS:,} tasks")
        self._event += 1
        e = self._event
        seen, nbytes = set(), 0
        for t, i in writes:
            st = self.stores[t.storage.id]
            if st.alloc[i] is None:
                st.alloc[i] = e
            st.last[i] = e
            if (st, i) not in seen:
                seen.add((st, i))
                nbytes += t.storage.tile_bytes(i)
        for t, i in reads:
            st = self.stores[t.storage.id]
            if st.alloc[i] is None:
                raise RuntimeError(f"dry run: {op} reads tile {i} of {t!r}, never written")
            st.last[i] = e
            if (st, i) not in seen:
                seen.add((st, i))
                nbytes += t.storage.tile_bytes(i)
        priority, layer, phase = self.runtime._scope
        self.tasks.append(Task(op, layer, phase, priority, self.leaf, nbytes, float(flops), e))

    def created(self) -> int:
        """A new tensor: its event number (``Runtime.reserve`` counts it from here)."""
        self._event += 1
        return self._event

    def free(self, t: MetaTensor) -> None:
        st = self.stores[t.id]
        if st.freed is None:
            self._event += 1
            st.freed = self._event

    def mark(self, name: str) -> None:
        """Name this point of the run (``alive_at``, ``peak(since=...)``)."""
        self.marks[name] = self._event

    # ---- reading it ------------------------------------------------------------------
    def alive_at(self, mark: str) -> int:
        """Bytes StarPU holds at ``mark`` once every task submitted before it is done: the
        tiles written by then whose tensor was not freed by then."""
        e = self.marks[mark]
        total = 0
        for st in self.stores.values():
            if st.freed is not None and st.freed <= e:
                continue
            t = st.tensor
            total += sum(t.tile_bytes(i) for i, a in enumerate(st.alloc)
                         if a is not None and a <= e)
        return total

    def peak(self, since: str | None = None, until: str | None = None) -> int:
        """The most bytes allocated at once, tasks running in submission order: a tile from
        the task that first writes it to the last that uses it (if its tensor is freed)."""
        lo = self.marks[since] if since else 0
        hi = self.marks[until] if until else self._event
        delta: Counter = Counter()
        for st in self.stores.values():
            t = st.tensor
            for i, a in enumerate(st.alloc):
                if a is None:
                    continue
                end = (st.last[i] if st.last[i] > a else st.freed) \
                    if st.freed is not None else None
                b = t.tile_bytes(i)
                delta[a] += b
                if end is not None:
                    delta[end + 1] -= b
        level, best = 0, 0
        for e in sorted(delta):
            if e > hi:
                break
            level += delta[e]
            if e >= lo:
                best = max(best, level)
        return best

    def held_peak(self) -> int:
        """The most bytes the runtime holds at one allocation: at each tensor's creation,
        ``Runtime.reserve`` counts every tensor created and not yet freed, whole (all its
        tiles, written or not), plus the new one, and refuses the allocation if they exceed
        its cap (RAM, plus the disk node out of core). So a cap at least this fits; the
        tiles StarPU allocates at once (``peak``) are fewer."""
        delta: Counter = Counter()
        for st in self.stores.values():
            b = math.prod(st.tensor.shape) * st.tensor.dtype.itemsize
            delta[st.created] += b
            if st.freed is not None:
                delta[st.freed] -= b
        level, best = 0, 0
        for e in sorted(delta):   # creations and frees are events of their own
            level += delta[e]
            best = max(best, level)
        return best

    def tasks_since(self, mark: str | None = None) -> list[Task]:
        e = self.marks[mark] if mark else 0
        return [t for t in self.tasks if t.event > e]

    def counts(self, since: str | None = None) -> Counter:
        """Tasks per op (after the mark ``since``)."""
        return Counter(t.op for t in self.tasks_since(since))

    def flops(self, since: str | None = None) -> Counter:
        """FLOPs per op (after the mark ``since``), as the codelets count them."""
        out: Counter = Counter()
        for t in self.tasks_since(since):
            out[t.op] += t.flops
        return out


# ---- the rules: one per tiled op -------------------------------------------------------
RULES: dict = {}


def rule(name: str):
    def register(fn):
        RULES[name] = fn
        return fn
    return register


def _like(dry, out, x, dtype=None):
    dtype = np.dtype(x.dtype if dtype is None else dtype)
    if out is None:
        return dry.empty(x.shape, x.tile_shape, dtype)
    _same(x, out, "out")
    return out


def _same(a, b, what: str) -> None:
    if a.shape != b.shape or a.tile_shape != b.tile_shape:
        raise ValueError(f"{what}: shapes/tiles differ: {a!r} vs {b!r}")


def _each_tile(dry, op, inputs, outputs, flops_per_elem: float) -> None:
    for i in range(outputs[0].ntiles):
        n = outputs[0].traits.tile_sizes[i]
        dry.task(op, [(t, i) for t in inputs], [(t, i) for t in outputs], flops_per_elem * n)


@rule("fill")
def fill(dry, y, value, after=None):
    if after is not None:
        last = after.ntiles - 1
        for i in range(y.ntiles):
            dry.task("fill_after", [(after, last)], [(y, i)], 0)
    else:
        _each_tile(dry, "fill_i64" if y.dtype == I64 else "fill", [], [y], 0)
    return y


@rule("copy")
def copy(dry, x, out=None):
    y = _like(dry, out, x)
    _each_tile(dry, "copy_i64" if x.dtype == I64 else "copy", [x], [y], 0)
    return y


@rule("add")
def add(dry, x, y, alpha=1.0, beta=1.0):
    _same(x, y, "add")
    _each_tile(dry, "axpby", [x], [y], 3)
    return y


@rule("scale")
def scale(dry, x, alpha, out=None):
    y = _like(dry, out, x)
    _each_tile(dry, "scale", [x], [y], 1)
    return y


@rule("mul")
def mul(dry, a, b, alpha=1.0, out=None):
    _same(a, b, "mul")
    y = _like(dry, out, a)
    _each_tile(dry, "mul", [a, b], [y], 2)
    return y


def _activation(name: str, flops: float, flops_backward: float):
    @rule(name)
    def forward(dry, x, out=None):
        y = _like(dry, out, x)
        _each_tile(dry, name, [x], [y], flops)
        return y

    @rule(f"{name}_backward")
    def backward(dry, x, dy, dx=None, beta=0.0):
        _same(x, dy, f"{name}_backward")
        dx = _like(dry, dx, x)
        _each_tile(dry, f"{name}_backward", [x, dy], [dx], flops_backward)
        return dx


_activation("gelu", 15, 25)
_activation("relu", 1, 3)
_activation("silu", 6, 11)


@rule("to_bf16")
def to_bf16(dry, x, out=None):
    y = _like(dry, out, x, BFLOAT16)
    _each_tile(dry, "f32_to_bf16", [x], [y], 0)
    return y


@rule("to_f32")
def to_f32(dry, x, out=None):
    y = _like(dry, out, x, F32)
    _each_tile(dry, "bf16_to_f32", [x], [y], 0)
    return y


@rule("gelu_bf16")
def gelu_bf16(dry, x):
    xk, y = dry.empty(x.shape, x.tile_shape, BFLOAT16), dry.empty(x.shape, x.tile_shape,
                                                                  BFLOAT16)
    _each_tile(dry, "gelu_bf16", [x], [xk, y], 15)
    return xk, y


@rule("gelu_backward_bf16")
def gelu_backward_bf16(dry, x, dy, dx=None, beta=0.0):
    _same(x, dy, "gelu_backward_bf16")
    dx = _like(dry, dx, x, F32)
    _each_tile(dry, "gelu_backward_bf16", [x, dy], [dx], 25)
    return dx


@rule("silu_gate")
def silu_gate(dry, g, u, out=None):
    _same(g, u, "silu_gate")
    y = _like(dry, out, g)
    _each_tile(dry, "silu_gate", [g, u], [y], 7)
    return y


@rule("silu_gate_backward")
def silu_gate_backward(dry, g, u, dy, dg=None, du=None, beta=0.0):
    _same(g, dy, "silu_gate_backward")
    dg, du = _like(dry, dg, g, F32), _like(dry, du, g, F32)
    _each_tile(dry, "silu_gate_backward", [g, u, dy], [dg, du], 14)
    return dg, du


@rule("silu_gate_bf16")
def silu_gate_bf16(dry, g, u):
    gk, uk, y = (dry.empty(g.shape, g.tile_shape, BFLOAT16) for _ in range(3))
    _each_tile(dry, "silu_gate_bf16", [g, u], [gk, uk, y], 7)
    return gk, uk, y


@rule("silu_gate_backward_bf16")
def silu_gate_backward_bf16(dry, g, u, dy, dg=None, du=None, beta=0.0):
    _same(g, dy, "silu_gate_backward_bf16")
    dg, du = _like(dry, dg, g, F32), _like(dry, du, g, F32)
    _each_tile(dry, "silu_gate_backward_bf16", [g, u, dy], [dg, du], 14)
    return dg, du


# ---- along an axis: slices and fibers (ops.reduce) --------------------------------------
def _slice(dry, x, axis, out=None, lead=()):
    drop = lambda t: t[:axis] + t[axis + 1:]  # noqa: E731
    if out is not None:
        return out
    return dry.empty(tuple(lead) + drop(x.shape), tuple(lead) + drop(x.tile_shape))


def _fiber(dry, x, axis, out=None):
    return out if out is not None else dry.empty((x.shape[axis],), (x.tile_shape[axis],))


def _reduction(name: str, flops):
    @rule(name)
    def reduce(dry, x, axis, out=None, alpha=1.0, beta=0.0):
        axis %= x.ndim
        s = _slice(dry, x, axis, out)
        for t in plan(x.traits, axis):
            dry.task(name, [(x, t.x)], [(s, t.s)], flops(t))
        return s


_reduction("sum_slice", lambda t: t.m * t.k * t.n + 3 * t.m * t.n)
_reduction("sumsq_slice", lambda t: 2 * t.m * t.k * t.n + 3 * t.m * t.n)


@rule("max_slice")
def max_slice(dry, x, axis, out=None):
    axis %= x.ndim
    s = _slice(dry, x, axis, out)
    for t in plan(x.traits, axis):
        dry.task("max_slice", [(x, t.x)], [(s, t.s)], t.m * t.k * t.n)
    return s


@rule("sumprod_slice")
def sumprod_slice(dry, a, b, axis, out=None, alpha=1.0, beta=0.0):
    axis %= a.ndim
    s = _slice(dry, a, axis, out)
    for t in plan(a.traits, axis):
        dry.task("sumprod_slice", [(a, t.x), (b, t.x)], [(s, t.s)],
                 2 * t.m * t.k * t.n + 3 * t.m * t.n)
    return s


@rule("sum_fiber")
def sum_fiber(dry, x, axis, out=None, alpha=1.0, beta=0.0):
    axis %= x.ndim
    f = _fiber(dry, x, axis, out)
    for t in plan(x.traits, axis):
        dry.task("sum_fiber", [(x, t.x)], [(f, t.f)], t.m * t.k * t.n + 3 * t.k)
    return f


def _broadcast(name: str, over: str, flops: int):
    @rule(name)
    def broadcast(dry, v, x, axis, *args, **kw):
        axis %= x.ndim
        for t in plan(x.traits, axis):
            dry.task(name, [(v, t.s if over == "slice" else t.f)], [(x, t.x)],
                     flops * t.m * t.k * t.n)
        return x


_broadcast("add_slice", "slice", 3)
_broadcast("mul_slice", "slice", 1)
_broadcast("add_fiber", "fiber", 3)
_broadcast("mul_fiber", "fiber", 1)


@rule("layer_norm")
def layer_norm(dry, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    axis %= x.ndim
    y = _like(dry, out, x)
    mean, inv_std = _slice(dry, x, axis), _slice(dry, x, axis)
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            dry.task("layer_norm_tile", [(x, t.x), (gamma, t.f), (beta, t.f)],
                     [(y, t.x), (mean, t.s), (inv_std, t.s)],
                     8 * t.m * t.k * t.n + 6 * t.m * t.n)
        return y, mean, inv_std
    RULES["sum_slice"](dry, x, axis, mean)
    for t in steps:
        dry.task("layer_norm_invstd", [(x, t.x), (mean, t.s)], [(inv_std, t.s)],
                 3 * t.m * t.k * t.n + 6 * t.m * t.n)
    for t in steps:
        dry.task("layer_norm_apply", [(x, t.x), (mean, t.s), (inv_std, t.s), (gamma, t.f),
                                      (beta, t.f)], [(y, t.x)], 4 * t.m * t.k * t.n)
    return y, mean, inv_std


@rule("layer_norm_backward")
def layer_norm_backward(dry, x, dy, gamma, mean, inv_std, axis=-1, dx=None, dgamma=None,
                        dbeta=None):
    axis %= x.ndim
    _same(x, dy, "layer_norm_backward")
    dx = _like(dry, dx, x)
    dgamma, dbeta = _fiber(dry, x, axis, dgamma), _fiber(dry, x, axis, dbeta)
    steps = plan(x.traits, axis)

    def reads(t, *extra):
        return [(x, t.x), (dy, t.x), (gamma, t.f), (mean, t.s), (inv_std, t.s), *extra]
    if x.grid_shape[axis] == 1:
        for t in steps:
            dry.task("layer_norm_backward_tile", reads(t), [(dx, t.x)],
                     15 * t.m * t.k * t.n + 2 * t.m * t.n)
    else:
        sums = _slice(dry, x, axis, lead=(2,))
        for t in steps:
            dry.task("layer_norm_backward_sums", reads(t), [(sums, t.s)],
                     6 * t.m * t.k * t.n + 6 * t.m * t.n)
        for t in steps:
            dry.task("layer_norm_backward_dx", reads(t, (sums, t.s)), [(dx, t.x)],
                     9 * t.m * t.k * t.n)
        sums.free()
    for t in steps:
        dry.task("layer_norm_backward_fiber",
                 [(x, t.x), (dy, t.x), (mean, t.s), (inv_std, t.s)],
                 [(dgamma, t.f), (dbeta, t.f)], 6 * t.m * t.k * t.n + 6 * t.k)
    return dx, dgamma, dbeta


@rule("rms_norm")
def rms_norm(dry, x, weight, axis=-1, eps=1e-6, out=None):
    axis %= x.ndim
    y = _like(dry, out, x)
    inv_rms = _slice(dry, x, axis)
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            dry.task("rms_norm_tile", [(x, t.x), (weight, t.f)], [(y, t.x), (inv_rms, t.s)],
                     4 * t.m * t.k * t.n + 4 * t.m * t.n)
        return y, inv_rms
    for t in steps:
        dry.task("rms_norm_invrms", [(x, t.x)], [(inv_rms, t.s)],
                 2 * t.m * t.k * t.n + 6 * t.m * t.n)
    for t in steps:
        dry.task("rms_norm_apply", [(x, t.x), (inv_rms, t.s), (weight, t.f)], [(y, t.x)],
                 2 * t.m * t.k * t.n)
    return y, inv_rms


@rule("rms_norm_backward")
def rms_norm_backward(dry, x, dy, weight, inv_rms, axis=-1, dx=None, dweight=None):
    axis %= x.ndim
    _same(x, dy, "rms_norm_backward")
    dx = _like(dry, dx, x)
    dweight = _fiber(dry, x, axis, dweight)
    steps = plan(x.traits, axis)

    def reads(t, *extra):
        return [(x, t.x), (dy, t.x), (weight, t.f), (inv_rms, t.s), *extra]
    if x.grid_shape[axis] == 1:
        for t in steps:
            dry.task("rms_norm_backward_tile", reads(t), [(dx, t.x)],
                     11 * t.m * t.k * t.n + t.m * t.n)
    else:
        sums = _slice(dry, x, axis)
        for t in steps:
            dry.task("rms_norm_backward_sums", reads(t), [(sums, t.s)],
                     5 * t.m * t.k * t.n + 3 * t.m * t.n)
        for t in steps:
            dry.task("rms_norm_backward_dx", reads(t, (sums, t.s)), [(dx, t.x)],
                     6 * t.m * t.k * t.n)
        sums.free()
    for t in steps:
        dry.task("rms_norm_backward_fiber", [(x, t.x), (dy, t.x), (inv_rms, t.s)],
                 [(dweight, t.f)], 3 * t.m * t.k * t.n + 3 * t.k)
    return dx, dweight


def _rotation(name: str):
    @rule(name)
    def rotate(dry, x, cos, sin, out=None, dx=None):
        y = _like(dry, out if name == "rope" else dx, x)
        tx = x.traits
        for i in range(tx.ntiles):
            shape = tx.tile_shapes[i]
            t = tx.grid_index(i)[-2]       # the tables' tile of this tile's tokens
            dry.task(name, [(x, i), (cos, t), (sin, t)], [(y, i)],
                     6 * math.prod(shape[:-1]) * (shape[-1] // 2))
        return y


_rotation("rope")
_rotation("rope_backward")


@rule("softmax")
def softmax(dry, x, axis, out=None):
    axis %= x.ndim
    y = _like(dry, out, x)
    steps = plan(x.traits, axis)
    if x.grid_shape[axis] == 1:
        for t in steps:
            dry.task("softmax_tile", [(x, t.x)], [(y, t.x)], 5 * t.m * t.k * t.n + t.m * t.n)
        return y
    mx = RULES["max_slice"](dry, x, axis)
    sums = _slice(dry, x, axis)
    for t in steps:
        dry.task("softmax_sumexp", [(x, t.x), (mx, t.s)], [(sums, t.s)],
                 3 * t.m * t.k * t.n + 2 * t.m * t.n)
    for t in steps:
        dry.task("softmax_apply", [(x, t.x), (mx, t.s), (sums, t.s)], [(y, t.x)],
                 3 * t.m * t.k * t.n + t.m * t.n)
    mx.free()
    sums.free()
    return y


@rule("softmax_backward")
def softmax_backward(dry, y, dy, axis, dx=None):
    axis %= y.ndim
    _same(y, dy, "softmax_backward")
    dx = _like(dry, dx, y)
    steps = plan(y.traits, axis)
    if y.grid_shape[axis] == 1:
        for t in steps:
            dry.task("softmax_backward_tile", [(y, t.x), (dy, t.x)], [(dx, t.x)],
                     7 * t.m * t.k * t.n + t.m * t.n)
        return dx
    sums = _slice(dry, y, axis, lead=(4,))
    for t in steps:
        dry.task("softmax_backward_sums", [(y, t.x), (dy, t.x)], [(sums, t.s)],
                 3 * t.m * t.k * t.n + 8 * t.m * t.n)
    for t in steps:
        dry.task("softmax_backward", [(y, t.x), (dy, t.x), (sums, t.s)], [(dx, t.x)],
                 4 * t.m * t.k * t.n + 3 * t.m * t.n)
    sums.free()
    return dx


# ---- layout ------------------------------------------------------------------------------
@rule("mask_causal")
def mask_causal(dry, x, value=float("-inf")):
    tx = x.traits
    for i in range(tx.ntiles):
        *_, m, n = tx.tile_shapes[i]
        row0, col0 = tx.tile_offsets[i][-2:]
        if col0 + n - 1 > row0:
            dry.task("mask_causal", [], [(x, i)], 0)
    return x


@rule("permute")
def permute(dry, x, perm, out=None):
    perm = tuple(perm)
    shape = tuple(x.shape[d] for d in perm)
    tiles = tuple(x.tile_shape[d] for d in perm)
    y = dry.empty(shape, tiles, x.dtype) if out is None else out
    tx, ty = x.traits, y.traits
    for i in range(tx.ntiles):
        g = tx.grid_index(i)
        dry.task("permute", [(x, i)], [(y, ty.index(tuple(g[d] for d in perm)))], 0)
    return y


# ---- embeddings and the loss ---------------------------------------------------------------
def _embedding_tiles(ids, table, rows):
    ti, tt = ids.traits, table.traits
    nv, ne = tt.grid_shape
    for si, ei in product(range(ti.ntiles), range(ne)):
        for vi in range(nv):
            yield si, vi * ne + ei, si * ne + ei


@rule("embedding")
def embedding(dry, ids, table, out=None):
    out = out if out is not None else dry.empty(ids.shape + table.shape[1:],
                                                ids.tile_shape + table.tile_shape[1:])
    for si, ki, ri in _embedding_tiles(ids, table, out):
        dry.task("embedding", [(ids, si), (table, ki)], [(out, ri)], 0)
    return out


@rule("embedding_backward")
def embedding_backward(dry, ids, dout, dtable):
    for si, ki, ri in _embedding_tiles(ids, dtable, dout):
        dry.task("embedding_backward", [(ids, si), (dout, ri)], [(dtable, ki)], 0)
    return dtable


@rule("cross_entropy")
def cross_entropy(dry, logits, labels, *, grad=False, grad_scale=1.0, out=None):
    if logits.shape[:-1] != labels.shape or logits.tile_shape[:-1] != labels.tile_shape:
        raise ValueError(f"cross_entropy: logits {logits!r} must be labels' shape and tiles "
                         f"plus a vocabulary axis; labels are {labels!r}")
    bf16 = logits.dtype == BFLOAT16
    suffix = "_bf16" if bf16 else ""
    tx, tl = logits.traits, labels.traits
    nv = logits.grid_shape[-1]
    stats = dry.empty(labels.shape + (nv, 4), labels.tile_shape + (1, 4))
    loss = dry.empty((1,))
    for si in range(tl.ntiles):
        n = tl.tile_sizes[si]
        for xi in range(si * nv, (si + 1) * nv):
            dry.task("cross_entropy_stats" + suffix, [(logits, xi), (labels, si)],
                     [(stats, xi)], 4.0 * n * tx.tile_shapes[xi][-1])
        for xi in range(si * nv + 1, (si + 1) * nv):
            dry.task("cross_entropy_merge", [(stats, xi)], [(stats, si * nv)], 8 * n)
        dry.task("cross_entropy_loss", [(stats, si * nv)], [(loss, 0)], 3 * n)
    dlogits = None
    if grad:
        dlogits = _like(dry, out, logits)
        for xi in range(tx.ntiles):
            si = xi // nv
            dry.task("cross_entropy_backward" + suffix,
                     [(logits, xi), (labels, si), (stats, si * nv)], [(dlogits, xi)],
                     3.0 * tl.tile_sizes[si] * tx.tile_shapes[xi][-1])
    stats.free()
    return loss, dlogits


# ---- the matrix product -------------------------------------------------------------------
@rule("gemm")
def gemm(dry, a, b, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, out=None, ndim=1,
         batch_ndim=0, out_dtype=None):
    """``ops.gemm``'s tasks: one per (c tile, k tile)."""
    c_dtype = np.dtype(out.dtype if out is not None else out_dtype or np.float32)
    a16, b16 = a.dtype == BFLOAT16, b.dtype == BFLOAT16
    if c_dtype == BFLOAT16:
        op = "gemm_bf16_c16" if a16 else "gemm_c16"
    else:
        op = "gemm_a16" if a16 and not b16 else "gemm_bf16" if a16 else "gemm"
    nb, nm, nn = batch_ndim, a.ndim - batch_ndim - ndim, b.ndim - batch_ndim - ndim
    ga = _groups(nb, nm, ndim, trans_a)
    gb = _groups(nb, ndim, nn, trans_b)
    for da, db, what in ((ga[0], gb[0], "batch"), (ga[2], gb[1], "contracted (k)")):
        sa, sb = tuple(a.shape[d] for d in da), tuple(b.shape[d] for d in db)
        ta, tb = tuple(a.tile_shape[d] for d in da), tuple(b.tile_shape[d] for d in db)
        if sa != sb or ta != tb:
            raise ValueError(f"gemm {what} dimensions differ: a has sizes {sa} tiles {ta}, b "
                             f"has sizes {sb} tiles {tb}; they must be equal")
    shape = tuple(a.shape[d] for d in ga[0] + ga[1]) + tuple(b.shape[d] for d in gb[2])
    tiles = tuple(a.tile_shape[d] for d in ga[0] + ga[1]) + tuple(b.tile_shape[d] for d in gb[2])
    c = dry.empty(shape, tiles, c_dtype) if out is None else out
    ta, tb, tc = a.traits, b.traits, c.traits
    kidxs = list(product(*(range(a.grid_shape[d]) for d in ga[2])))
    ka = [_flat(k, ta.grid_strides, ga[2]) for k in kidxs]
    kb = [_flat(k, tb.grid_strides, gb[1]) for k in kidxs]
    ksize = [math.prod(ta.tile_shapes[ka[j]][d] for d in ga[2]) for j in range(len(kidxs))]
    for ci in range(tc.ntiles):
        cidx, cshape = tc.grid_index(ci), tc.tile_shapes[ci]
        a0 = _flat(cidx[:nb + nm], ta.grid_strides, ga[0] + ga[1])
        b0 = _flat(cidx[:nb] + cidx[nb + nm:], tb.grid_strides, gb[0] + gb[2])
        mnb = math.prod(cshape)
        for j in range(len(kidxs)):
            dry.task(op, [(a, a0 + ka[j]), (b, b0 + kb[j])], [(c, ci)], 2.0 * mnb * ksize[j])
    return c


def _groups(nb: int, n1: int, n2: int, swap: bool):
    batch = tuple(range(nb))
    g1, g2 = tuple(range(nb, nb + n1)), tuple(range(nb + n1, nb + n1 + n2))
    if swap:
        g2, g1 = tuple(range(nb, nb + n2)), tuple(range(nb + n2, nb + n2 + n1))
    return batch, g1, g2


def _flat(index, strides, dims) -> int:
    return sum(i * strides[d] for i, d in zip(index, dims))
