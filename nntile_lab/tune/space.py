"""The tilings a tune chooses among: a grid of tile values over a base spec.

Each tile field is fixed (one value: the base spec's, or one the user gave) or an axis (its
values). Left to the tuner, an axis takes the values worth trying for its dimension
(``ladder``): powers of two that make whole tiles, from about an eighth of the dimension to
all of it (a batch tile holds at least 64 tokens), and the whole dimension; the embedding and
sequence tiles stay whole unless asked for (a split there multiplies the small element-wise
tasks more than it feeds the products). A grid point that is not a valid spec is dropped with
its reason; one the memory planner says cannot run is dropped too (``feasible``).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from nntile_lab.errors import UsageError
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec

# the axes a tune varies unless told otherwise (the others stay whole)
DEFAULT_AXES = ("batch_tile", "inner_tile", "head_tile", "vocab_tile")
MIN_TOKENS_PER_TILE = 64
MAX_SPLIT = 8          # the smallest tile tried is about dimension / MAX_SPLIT
VOCAB_TILES = (2048, 4096, 8192, 16384)


def ladder(spec: ExperimentSpec, name: str) -> list:
    """The values worth trying for tile field ``name`` of ``spec`` (module docstring)."""
    dim = spec.dims()[name][1]
    if name == "batch_tile":
        out = [b for b in range(1, dim + 1) if dim % b == 0
               and b * spec.seq_len >= min(MIN_TOKENS_PER_TILE, dim * spec.seq_len)]
    elif name == "head_tile":
        out = [h for h in range(1, dim + 1) if dim % h == 0]
    elif name == "vocab_tile":
        out = [v for v in VOCAB_TILES if v < dim] + [dim]
    else:
        lo = max(1, math.ceil(dim / MAX_SPLIT))
        out = [p for p in (2 ** k for k in range(0, 31)) if lo <= p < dim and dim % p == 0]
        out.append(dim)
    return sorted(set(out))


@dataclass
class Space:
    """``base`` with every tile in ``fixed`` (field → value) and ``axes`` (field → values);
    ``candidates`` the valid specs of the grid, ``invalid`` the rest with their reasons."""

    base: ExperimentSpec
    axes: dict
    fixed: dict
    candidates: list = field(default_factory=list)
    invalid: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.axes.values())

    def label(self, spec: ExperimentSpec) -> str:
        """The axes' values of ``spec``, as ``name=value`` pairs."""
        return ", ".join(f"{a}={getattr(spec, a)}" for a in self.axes)


def space(base: ExperimentSpec, given: dict | None = None) -> Space:
    """The grid over ``base``: ``given`` maps a tile field to a list of values (an axis, or
    one value: fixed); fields not given vary over their ``ladder`` when in DEFAULT_AXES and
    keep ``base``'s value otherwise. UsageError when nothing varies."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(TILE_FIELDS))
    if unknown:
        raise UsageError(f"tune varies tile fields only ({', '.join(TILE_FIELDS)}); "
                         f"{', '.join(unknown)} cannot be an axis")
    axes, fixed = {}, {}
    for name in TILE_FIELDS:
        values = given.get(name)
        if values is None:
            values = ladder(base, name) if name in DEFAULT_AXES else [getattr(base, name)]
        values = list(dict.fromkeys(values))
        if len(values) > 1:
            axes[name] = values
        else:
            fixed[name] = values[0]
    if not axes:
        raise UsageError("nothing to tune: every tile is fixed ("
                         + ", ".join(f"{k}={v}" for k, v in fixed.items())
                         + "); give a tile field several values (e.g. --inner-tile 256,512) "
                         "or leave one out to let the tuner choose it")
    sp = Space(base.replace(**fixed), axes, fixed)
    for combo in itertools.product(*axes.values()):
        changes = dict(zip(axes, combo))
        try:
            sp.candidates.append(sp.base.replace(**changes))
        except ValueError as exc:
            sp.invalid.append((changes, str(exc)))
    return sp


def feasible(sp: Space, check) -> tuple[list, list]:
    """``(fits, pruned)``: the candidates ``check(spec)`` accepts (it raises for one that
    cannot run, e.g. ``memory.check``), and ``(spec, reason)`` for the others."""
    fits, pruned = [], []
    for spec in sp.candidates:
        try:
            check(spec)
        except ValueError as exc:
            pruned.append((spec, str(exc)))
        else:
            fits.append(spec)
    return fits, pruned
