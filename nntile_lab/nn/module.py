"""Declaring a model: parameters, leaf layers and compositions of them.

- ``Param``: a parameter as declared (shape, tiles, initialisation, whether a GEMM reads it);
  a built model gives it ``value`` (float32), ``grad`` and, under ``bf16``, ``value16``.
- ``Layer``: a leaf, written from tiled ops: ``forward(ctx, *tensors, **kw) -> (out,
  record)`` keeps a typed ``Record``; ``backward(ctx, record, dy, dx) -> dx`` uses it.
- ``Module``: a composition; its ``forward(*values)`` is ordinary Python over ``Value``s
  (calls of its children and ``a + b``), recorded on the step's tape; its backward is the
  recorded leaves' backwards in reverse (``nn.tape``) — nobody writes it.
- ``ModuleList``: a list of modules; each item is a *stage* of the step (a trace layer, a
  priority level, the unit of the memory hints: ``nn.policy``).

A module tree is plain data: building one needs no StarPU (the planner and the FLOP counts
read trees built from a config alone).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from nntile_lab.nn import tape as _tape
from nntile_lab.nn.tape import ShapeError


# ---- parameters ------------------------------------------------------------------------
@dataclass(frozen=True)
class Init:
    """How a parameter starts: N(0, std²) when ``std`` is given, else the constant ``value``."""

    std: float | None = None
    value: float = 0.0

    def draw(self, shape, rng: np.random.Generator) -> np.ndarray:
        if self.std is not None:
            return rng.normal(0.0, self.std, shape).astype(np.float32)
        return np.full(shape, self.value, np.float32)


def normal(std: float) -> Init:
    return Init(std=float(std))


zeros, ones = Init(value=0.0), Init(value=1.0)


class Param:
    """A declared parameter. ``tiles``: a tile size per dimension (None: the whole of it).
    ``gemm``: a GEMM reads it as an operand (it then has a bf16 copy under ``bf16``).
    Once the model is built: ``name`` (its module path), ``value``, ``grad``, ``value16``."""

    def __init__(self, shape, tiles=None, *, init: Init = zeros, gemm: bool = False):
        self.shape = tuple(int(s) for s in shape)
        for s in self.shape:
            if s < 1:
                raise ValueError(f"parameter shape {self.shape}: every size must be ≥ 1")
        tiles = (None,) * len(self.shape) if tiles is None else tuple(tiles)
        if len(tiles) != len(self.shape):
            raise ValueError(f"parameter of shape {self.shape} has tiles {tiles}: give one tile "
                             "(or None) per dimension")
        for t in tiles:
            if t is not None and (not isinstance(t, int) or isinstance(t, bool) or t < 1):
                raise ValueError(f"parameter of shape {self.shape}: tile {t!r} must be a "
                                 "positive integer or None (the whole dimension)")
        self.tiles, self.init, self.gemm = tiles, init, gemm
        self.name: str | None = None
        self.value = self.grad = self.value16 = None

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return tuple(s if t is None else min(t, s) for s, t in zip(self.shape, self.tiles))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def operand(self):
        """The tensor a GEMM reads: the bf16 copy where there is one, else ``value``."""
        return self.value if self.value16 is None else self.value16

    def tensors_read(self) -> list:
        """What a step reads of it (the memory hints' targets): the bf16 copy of a GEMM
        weight under bf16 — ``value`` itself is then read only by the optimizer — else
        ``value``."""
        return [self.operand]

    def __repr__(self) -> str:
        return f"Param({self.name or '?'}, shape={self.shape}, tiles={self.tile_shape})"


# ---- records ---------------------------------------------------------------------------
class Record:
    """Base of a leaf's saved activations: a dataclass whose fields are tensors (or None)."""

    _names: tuple | None = None    # its fields' names, per class (fields() is slow)

    def tensors(self) -> list:
        cls = type(self)
        if cls.__dict__.get("_names") is None:
            cls._names = tuple(f.name for f in fields(cls))
        return [t for t in (getattr(self, n) for n in cls._names) if t is not None]

    def nbytes(self) -> int:
        return sum(math.prod(t.shape) * t.dtype.itemsize for t in self.tensors())


# ---- modules ---------------------------------------------------------------------------
class Module:
    """A node of the model tree. Children (``Module``) and parameters (``Param``) are
    registered by assigning them to attributes, in order; ``forward`` is the composition."""

    _stage_item = False   # set on the items of a ModuleList
    path = ""             # its place in the model (``transformer.h.0.attn``), set at build

    def __init__(self):
        self.__dict__.setdefault("_children", {})
        self.__dict__.setdefault("_params", {})

    def __setattr__(self, name: str, value) -> None:
        children = self.__dict__.setdefault("_children", {})
        params = self.__dict__.setdefault("_params", {})
        children.pop(name, None)
        params.pop(name, None)
        if isinstance(value, Module):
            children[name] = value
        elif isinstance(value, Param):
            params[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kw):
        raise NotImplementedError(f"{type(self).__name__} has no forward: a Module's forward "
                                  "composes its children (x = x + self.attn(self.ln(x)))")

    def __call__(self, *args, **kw):
        return _tape.current(self).call_module(self, args, kw)

    # ---- the tree ------------------------------------------------------------------
    def children(self) -> dict[str, Module]:
        return dict(self.__dict__.get("_children", {}))

    def named_modules(self, prefix: str = ""):
        """``(path, module)`` for this module and every descendant, depth first, each
        module once (a module reachable twice keeps its first path)."""
        seen: set[int] = set()

        def walk(m: Module, path: str):
            if id(m) in seen:
                return
            seen.add(id(m))
            yield path, m
            for name, child in m.children().items():
                yield from walk(child, f"{path}.{name}" if path else name)
        yield from walk(self, prefix)

    def own_params(self) -> dict[str, Param]:
        return {n: p for n, p in self.__dict__.get("_params", {}).items() if p is not None}

    def named_parameters(self) -> dict[str, Param]:
        """Every parameter by path (``transformer.h.0.attn.q.weight``), in registration
        order (a module's own, then its children's); a tied parameter once, under its
        first path."""
        out, seen = {}, set()
        for path, m in self.named_modules():
            for n, p in m.own_params().items():
                if id(p) not in seen:
                    seen.add(id(p))
                    out[f"{path}.{n}" if path else n] = p
        return out

    def parameters(self) -> list[Param]:
        return list(self.named_parameters().values())

    def num_params(self) -> int:
        return sum(p.size for p in self.parameters())

    def flops_per_token(self, seq_len: int) -> float:
        """Model FLOPs of one training token (forward and backward) of this subtree: each
        module's own ``own_flops_per_token``, summed (PaLM appendix B's count)."""
        return float(sum(m.own_flops_per_token(seq_len) for _, m in self.named_modules()))

    def own_flops_per_token(self, seq_len: int) -> float:
        """This module's own part of ``flops_per_token``: 6 per element of its own
        parameters (a multiply-add forward, two backward) for a leaf, 0 for a composition."""
        return 0.0

    def stage_modules(self) -> list[Module]:
        """The stages of this tree: the items of its ModuleLists, outermost only."""
        out = []

        def walk(m: Module):
            for child in m.children().values():
                if child._stage_item:
                    out.append(child)
                else:
                    walk(child)
        walk(self)
        return out

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for name, child in self.children().items():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        for name, p in self.own_params().items():
            lines.append(f"  {name}: {p.shape} tiles {p.tile_shape}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"


class ModuleList(Module):
    """Modules in a list (``model.h[3]``); each item is a stage of the step."""

    def __init__(self, modules=()):
        super().__init__()
        self._items: list[Module] = []
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList holds modules, got {type(module).__name__}")
        module._stage_item = True
        setattr(self, str(len(self._items)), module)
        self._items.append(module)

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        return self._items[i]


class Layer(Module):
    """A leaf layer: forward and backward written from tiled ops (``nn.backend.ops``).

    ``forward(ctx, *tensors, **kw) -> (out, record)``: the tensors are the values' tiled
    tensors; ``record`` (a ``Record``, or None) is what the backward needs. Keyword
    arguments are passed through from the call (``layer(x, pos0=3)``) and are not
    differentiated. ``backward(ctx, record, dy, dx) -> dx``: with ``dx`` None return a new
    gradient, else ADD into ``dx``; with several inputs ``dx`` is a tuple and so is the
    result (None where an input has no gradient: token ids). A loss layer (``is_loss``)
    returns the loss and is given ``dy=None``. A layer without a ``backward`` can run only
    where nothing is differentiated (``loss``, generation)."""

    is_loss = False

    def __call__(self, *args, **kw):
        return _tape.current(self).call_leaf(self, args, kw)

    def forward(self, ctx, *tensors, **kw):
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    backward = None   # a layer with a backward defines it

    @property
    def has_backward(self) -> bool:
        return callable(getattr(self, "backward", None))

    def own_flops_per_token(self, seq_len: int) -> float:
        return 6.0 * sum(p.size for p in self.own_params().values())

    def backward_trigger(self, record):
        """The tensor a loss layer's backward reads first (the policy orders the lazy zero
        fills of the gradients it adds to after it): none by default."""
        return None

    def expect(self, x, what: str, *, size: int, tile: int, axis: int = -1) -> None:
        """Refuse an input whose ``axis`` is not ``size`` long in tiles of ``tile``
        (``ShapeError``; the tape adds which layer produced it)."""
        n, t = x.shape[axis], x.tile_shape[axis]
        if n != size or t != min(tile, size):
            raise ShapeError(f"{self.path or type(self).__name__} takes {what} of size {size} "
                             f"in tiles of {min(tile, size)} along axis {axis}, got size {n} "
                             f"in tiles of {t}")


def tile(t: int | None, dim: int) -> int:
    """A tile size for a dimension of ``dim`` (None: the whole dimension)."""
    return dim if t is None else min(t, dim)
