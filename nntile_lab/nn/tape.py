"""The step's tape: a composition's forward is recorded as it runs, its backward derived.

Inside a step (``StepPolicy.forward()``), ``Value``s flow through the modules' ``forward``
code. Calling a leaf layer runs its forward at once (its tasks are submitted) and, in a
training step, appends a node: the layer, which values went in and came out, and its saved
record. ``a + b`` appends a residual-add node. ``Tape.backward`` walks the nodes in reverse,
calls each leaf's backward with the gradient of its output, and routes the gradients of its
inputs: a value used by several consumers gets their gradients added into one tensor, the
second and later consumers adding into what the first produced (``dx`` given to the
layer's backward), with no extra add task.

Memory, as a hand-written step would do it:

- A tensor lives while something holds it: a ``Value`` (until Python drops it: an
  intermediate of ``x + self.attn(self.ln_1(x))`` dies as soon as the expression is done)
  or a saved record (until its node's backward ran). The last holder frees it (the free
  waits for the tasks already submitted that use it).
- ``a + b`` writes the sum into ``b``'s tensor when nothing but ``b`` holds it (else
  ``a``'s, else a new one): a residual add costs no tensor. ``b`` is then spent; using it
  again raises an error that says so.
- The backward of ``a + b`` hands the gradient to both operands without a copy when the
  tape shows no consumer could corrupt the other's copy (both then add into one buffer, in
  submission order: StarPU's sequential consistency orders the reads before the writes) —
  GPT-2's in-place ``dx`` — and copies it otherwise.
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

from nntile_lab.nn.backend import ops

_current = None      # the Tape of the step running now


def current(module) -> Tape:
    """The running step's tape; outside a step, one clear error."""
    if _current is None:
        raise RuntimeError(f"{module.path or type(module).__name__} was called outside a step: "
                           "a model runs its layers inside forward_backward / loss (and "
                           "nn.gradcheck a single layer)")
    return _current


def set_current(tape):
    global _current
    previous, _current = _current, tape
    return previous


class ShapeError(ValueError):
    """Layers whose shapes or tiles do not fit together (the message names both)."""


class SpentValue(RuntimeError):
    """A value whose tensor a residual add reused."""


class Value:
    """A tensor flowing through a step's forward (what a module's forward sees)."""

    __slots__ = ("_tensor", "tape", "uid", "producer", "node", "requires_grad", "spent")

    def __init__(self, tape: Tape, tensor, producer: str, node: int | None,
                 requires_grad: bool):
        self._tensor, self.tape, self.producer = tensor, tape, producer
        self.node, self.requires_grad, self.spent = node, requires_grad, ""
        self.uid = next(tape.uids)
        tape.hold(tensor)

    @property
    def tensor(self):
        if self.spent:
            raise SpentValue(f"the output of {self.producer} was overwritten in place by "
                             f"{self.spent}: a + b writes the sum into b's tensor when nothing "
                             "else holds it; use b before the sum, or write "
                             "nn.add(a, b, inplace=False)")
        return self._tensor

    shape = property(lambda self: self.tensor.shape)
    tile_shape = property(lambda self: self.tensor.tile_shape)
    dtype = property(lambda self: self.tensor.dtype)
    ndim = property(lambda self: self.tensor.ndim)

    def __add__(self, other: Value) -> Value:
        return self.tape.add(self, other)

    def __del__(self):
        if self._tensor is not None and not self.spent:
            self.tape.release(self._tensor)

    def __repr__(self) -> str:
        t = self._tensor
        what = "spent" if self.spent else f"shape={t.shape}, tiles={t.tile_shape}"
        return f"Value(from {self.producer}, {what})"


def add(a: Value, b: Value, *, inplace: bool = True) -> Value:
    """``a + b``; ``inplace=False`` never reuses an operand's tensor."""
    return a.tape.add(a, b, inplace=inplace)


@dataclass(eq=False)
class Node:
    """One recorded call: a leaf (``layer``) or a residual add (``layer`` None)."""

    index: int
    layer: object
    ins: list          # (uid, requires_grad) of each input value
    out: int           # uid of the output value
    record: object
    region: object     # the policy's stage region it ran in


class Tape:
    """The record of one step's forward, and its backward."""

    def __init__(self, policy, *, training: bool):
        self.policy, self.training = policy, training
        self.nodes: list[Node] = []
        self.uids = itertools.count()
        self._held: dict[int, list] = {}    # id(storage) → [holders, storage]

    # ---- who holds a tensor --------------------------------------------------------
    def hold(self, t) -> None:
        st = t.storage
        entry = self._held.get(id(st))
        if entry is None:
            self._held[id(st)] = [1, st]
        else:
            entry[0] += 1

    def release(self, t) -> None:
        st = t.storage
        entry = self._held.get(id(st))
        if entry is None:   # a tensor of another (finished) step
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self._held[id(st)]
            st.free()

    def holders(self, t) -> int:
        entry = self._held.get(id(t.storage))
        return 0 if entry is None else entry[0]

    # ---- forward -------------------------------------------------------------------
    def input(self, tensor, name: str, *, requires_grad: bool = False) -> Value:
        """A model input: token ids, labels, positions — no gradient — or (a gradient
        check's) a float tensor whose gradient ``backward(keep=...)`` returns."""
        return Value(self, tensor, name, None, requires_grad)

    def call_module(self, module, args, kw):
        if module._stage_item:
            return self.policy.run_stage(module, args, kw)
        return module.forward(*args, **kw)

    def call_leaf(self, layer, args, kw) -> Value:
        for i, a in enumerate(args):
            if not isinstance(a, Value):
                raise TypeError(f"{layer.path or type(layer).__name__}: argument {i} is a "
                                f"{type(a).__name__}; a layer's positional arguments are the "
                                "values a step computes (keyword arguments pass through "
                                "undifferentiated)")
        if self.training and not layer.has_backward:
            raise TypeError(f"{layer.path or type(layer).__name__} ({type(layer).__name__}) "
                            "has no backward: it can run in loss() or generation, not in a "
                            "training step")
        tensors = [a.tensor for a in args]
        ctx = self.policy.leaf_context(layer)
        try:
            out, record = layer.forward(ctx, *tensors, **kw)
        except ShapeError as exc:
            came = "; ".join(f"input {i} from {a.producer}" for i, a in enumerate(args))
            raise ShapeError(f"{exc} ({came})") from None
        finally:
            ctx.close()
        saved = record.tensors() if record is not None else []
        for t in saved:
            self.hold(t)
        node = None
        value = Value(self, out, layer.path or type(layer).__name__, None, True)
        if self.training:
            node = Node(len(self.nodes), layer, [(a.uid, a.requires_grad) for a in args],
                        value.uid, record, self.policy.region)
            self.nodes.append(node)
            value.node = node.index
            self.policy.saved(record)
        else:   # nothing will read it: dropped now
            for t in saved:
                self.release(t)
        return value

    def add(self, a: Value, b: Value, *, inplace: bool = True) -> Value:
        if not isinstance(b, Value) or not isinstance(a, Value):
            raise TypeError(f"a residual add takes two values, got {type(a).__name__} + "
                            f"{type(b).__name__}")
        ta, tb = a.tensor, b.tensor
        if ta.shape != tb.shape or ta.tile_shape != tb.tile_shape:
            raise ShapeError(f"cannot add the output of {a.producer} (shape {ta.shape}, tiles "
                             f"{ta.tile_shape}) to that of {b.producer} (shape {tb.shape}, "
                             f"tiles {tb.tile_shape}): a residual add needs equal shapes and "
                             "tiles")
        where = f"the residual add after {b.producer}"
        if inplace and self._reusable(b, a):
            out = ops.add(ta, tb)                 # b = a + b
            spent = b
        elif inplace and self._reusable(a, b):
            out = ops.add(tb, ta)                 # a = b + a
            spent = a
        else:
            out = ops.add(ta, ops.copy(tb))       # a new tensor
            spent = None
        value = Value(self, out, where, None, a.requires_grad or b.requires_grad)
        if spent is not None:   # its hold passes to the sum
            self.release(out)
            spent.spent = where
        if self.training:
            node = Node(len(self.nodes), None, [(a.uid, a.requires_grad),
                                                (b.uid, b.requires_grad)], value.uid, None,
                        self.policy.region)
            self.nodes.append(node)
            value.node = node.index
        return value

    def _reusable(self, v: Value, other: Value) -> bool:
        """Whether the sum may overwrite ``v``'s tensor: only ``v`` holds it, it is float32
        and not ``other``'s."""
        t = v._tensor
        return (v.node is not None or v.requires_grad) and self.holders(t) == 1 \
            and t.dtype.kind == "f" and t.dtype.itemsize == 4 \
            and t.storage is not other._tensor.storage

    # ---- backward ------------------------------------------------------------------
    def backward(self, seed: dict | None = None, keep=()) -> dict:
        """The recorded leaves' backwards in reverse; frees each saved record and each
        gradient once its last reader is submitted. ``seed``: {value: its gradient} to start
        from (else a loss layer's own); ``keep``: values whose gradients are returned
        ({value uid: tensor}, the caller's to free) instead of freed."""
        nodes = self.nodes
        producer = {n.out: n.index for n in nodes}
        consumers: dict[int, list[int]] = defaultdict(list)
        for n in nodes:
            for uid, _ in n.ins:
                consumers[uid].append(n.index)
        grads = _Grads()
        for v, g in (seed or {}).items():
            grads.give(v.uid, g)
        self.policy.begin_backward(nodes, grads)
        for n in reversed(nodes):
            if n.layer is None:
                self.policy.enter_backward(n, grads.get(n.out))
                self._add_backward(n, grads, producer, consumers)
                continue
            if n.out not in grads and not n.layer.is_loss:
                self._drop_record(n)          # its output reached no loss
                continue
            layer = n.layer
            dy = grads.pop(n.out) if not layer.is_loss else None
            self.policy.enter_backward(n, dy if dy is not None
                                       else layer.backward_trigger(n.record))
            targets = tuple(grads.get(uid) if rg else None for uid, rg in n.ins)
            ctx = self.policy.leaf_context(layer)
            try:
                dx = layer.backward(ctx, n.record, dy, targets if len(targets) > 1
                                    else targets[0])
            finally:
                ctx.close()
            dx = dx if len(targets) > 1 else (dx,)
            for (uid, rg), target, d in zip(n.ins, targets, dx):
                if not rg or d is None or target is not None:
                    continue
                if uid in grads:               # the same value twice among the inputs
                    ops.add(d, grads.get(uid))
                    d.storage.free()
                else:
                    grads.give(uid, d)
            if dy is not None:
                grads.drop(dy)
            self._drop_record(n)
        self.policy.end_backward(grads)
        kept = {v.uid: grads.pop(v.uid) for v in keep}
        grads.clear()
        return kept

    def _drop_record(self, n: Node) -> None:
        if n.record is not None:
            for t in n.record.tensors():
                self.release(t)
            n.record = None

    def _add_backward(self, n: Node, grads: _Grads, producer, consumers) -> None:
        """out = a + b: ∂a += g, ∂b += g — by reference where it is safe."""
        g = grads.pop(n.out)
        if g is None:
            return
        owned = grads.holders(g) == 1          # no other value's gradient is this tensor
        given = None
        for uid, rg in reversed(n.ins):        # b first (it usually holds the branch)
            if not rg:
                continue
            if uid in grads:
                ops.add(g, grads.get(uid))     # ∂v += g
            elif owned and (given is None or
                            _may_share(given, uid, n.index, producer, consumers)):
                grads.give(uid, g)
                given = uid
            else:
                grads.give(uid, ops.copy(g))
        grads.drop(g)


def _may_share(u1: int, u2: int, i: int, producer: dict, consumers: dict) -> bool:
    """Whether the values ``u1`` and ``u2`` (summed by node ``i``, neither with a gradient
    yet) may share one gradient tensor: one of them (say u1) is used only by this sum, and
    every other consumer of u2 runs before u1's producer — so in the backward u1's producer
    reads the shared tensor before anything adds u2's other gradients into it."""
    for first, second in ((u1, u2), (u2, u1)):
        p = producer.get(first)
        if p is None or consumers[first] != [i] or first == second:
            continue
        if all(j < p for j in consumers[second] if j != i):
            return True
    return False


class _Grads:
    """The gradients of the values, by uid; a tensor shared by several values is freed
    when the last of them lets it go."""

    def __init__(self):
        self._by_uid: dict[int, object] = {}
        self._holders: dict[int, list] = {}

    def __contains__(self, uid: int) -> bool:
        return uid in self._by_uid

    def get(self, uid: int):
        return self._by_uid.get(uid)

    def give(self, uid: int, t) -> None:
        self._by_uid[uid] = t
        entry = self._holders.setdefault(id(t.storage), [0, t])
        entry[0] += 1

    def pop(self, uid: int):
        """The gradient of ``uid``, which its slot no longer holds — the caller drops it."""
        return self._by_uid.pop(uid, None)

    def holders(self, t) -> int:
        entry = self._holders.get(id(t.storage))
        return 0 if entry is None else entry[0]

    def drop(self, t) -> None:
        entry = self._holders[id(t.storage)]
        entry[0] -= 1
        if entry[0] == 0:
            del self._holders[id(t.storage)]
            t.storage.free()

    def clear(self) -> None:
        for t in list(self._by_uid.values()):
            self.drop(t)
        self._by_uid.clear()
