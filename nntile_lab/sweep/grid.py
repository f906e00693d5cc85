"""Points of a sweep: the product of axes over a base spec, or a list of specs.

A point that is not a valid spec (a tile larger than its dimension, zero, a head count
that does not divide the width) is kept as an ``InvalidSpec`` carrying its values and the
spec's error message, so the sweep reports it as a row instead of stopping.
"""
from __future__ import annotations

import itertools

from nntile_lab.spec import ExperimentSpec, field_names, parse_value

# a range of more values than this is refused outright (a sweep of more than
# sweep.size.MAX_POINTS points asks for confirmation; this many would only fill memory)
MAX_RANGE = 10_000_000


class InvalidSpec:
    """A grid point whose values do not make a spec: ``values`` and ``error``."""

    def __init__(self, values: dict, error: str):
        self.values, self.error = values, error

    def to_dict(self) -> dict:
        return dict(self.values)

    def __repr__(self) -> str:
        return f"InvalidSpec({self.values!r}: {self.error})"

    def __eq__(self, other) -> bool:
        return isinstance(other, InvalidSpec) and (self.values, self.error) == (
            other.values, other.error)


def point(base: ExperimentSpec, **changes) -> ExperimentSpec | InvalidSpec:
    """``base.replace(**changes)``, or an InvalidSpec saying why not."""
    try:
        return base.replace(**changes)
    except ValueError as exc:
        values = base.to_dict() | changes
        return InvalidSpec(values, str(exc))


def grid(base: ExperimentSpec | None = None, **axes) -> list[ExperimentSpec | InvalidSpec]:
    """Every combination of the ``axes`` (field → list of values) over ``base``, the first
    axis varying slowest. A scalar is a one-value axis. Unknown fields raise ValueError."""
    base = base or ExperimentSpec()
    unknown = sorted(set(axes) - set(field_names()))
    if unknown:
        raise ValueError(f"unknown sweep axis {unknown}: axes are ExperimentSpec fields "
                         f"({', '.join(field_names())})")
    names = list(axes)
    values = [v if isinstance(v, (list, tuple, range)) else [v] for v in axes.values()]
    for name, vals in zip(names, values):
        if not len(vals):
            raise ValueError(f"sweep axis {name} has no values")
    return [point(base, **dict(zip(names, combo))) for combo in itertools.product(*values)]


# Fields whose one value is itself a comma set (``hints``: "invalidate,wont_use"): their
# values are separated by "/" instead (``--hints none/invalidate,wont_use/all``), so that a
# hint set is never split into an axis of single hints
SET_SEPARATOR = {"hints": "/"}


def parse_axes(texts: dict[str, str]) -> dict[str, list]:
    """Axes from comma lists (``{"vocab_tile": "2048,4096"}``), ``a:b:step`` ranges
    (inclusive, ``"256:1024:256"``) and ``none`` for the whole dimension; the hint sets of
    ``hints`` are separated by "/" (``SET_SEPARATOR``)."""
    axes = {}
    for name, text in texts.items():
        values = []
        for part in str(text).split(SET_SEPARATOR.get(name, ",")):
            part = part.strip()
            if not part:
                continue
            if part.count(":") == 2:
                lo, hi, step = (parse_value(name, p) for p in part.split(":"))
                if not all(isinstance(v, int) for v in (lo, hi, step)) or step < 1:
                    raise ValueError(f"--{name.replace('_', '-')} {part!r}: a range is "
                                     "LOW:HIGH:STEP with integers and STEP ≥ 1")
                if lo > hi:
                    raise ValueError(f"--{name.replace('_', '-')} {part!r}: LOW={lo} is "
                                     f"above HIGH={hi}; a range is LOW:HIGH:STEP with "
                                     "LOW ≤ HIGH")
                span = range(lo, hi + 1, step)
                if len(span) > MAX_RANGE:     # counted before it fills memory
                    raise ValueError(f"--{name.replace('_', '-')} {part!r} has "
                                     f"{len(span):,} values: no sweep can measure that "
                                     "many; give a larger STEP")
                values += list(span)
            else:
                values.append(parse_value(name, part))
        if not values:
            raise ValueError(f"--{name.replace('_', '-')} {text!r} gives no values")
        axes[name] = values
    return axes
