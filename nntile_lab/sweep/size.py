"""How big a sweep is before it starts: its point count and a rough time, and the limit
above which a command asks for confirmation (``--yes``).

A range such as ``--batch-tile 1:128:1 --seq-tile 1:32:1 --embd-tile 1:256:1`` is a
million points — weeks of measuring. The count is the product of the axes' lengths,
found before any point (or spec) is built.
"""
from __future__ import annotations

import math

from nntile_lab.spec import ExperimentSpec

MAX_POINTS = 500          # above this a sweep runs only when confirmed
START_S = 0.7             # a point's process start-up (sweep.run's docstring)
ROUGH_GFLOPS = 50.0       # a deliberately modest rate for a 2-core machine's estimate


def point_count(axes: dict[str, list]) -> int:
    return math.prod(len(v) for v in axes.values()) if axes else 1


def estimate_s(n: int, base_values: dict) -> float:
    """Seconds for ``n`` points like the base spec (start-up + warm-up + timed steps)."""
    try:
        spec = ExperimentSpec(**base_values)
    except (ValueError, TypeError):
        spec = ExperimentSpec()
    steps = spec.warmup_steps + spec.measure_steps
    return n * (START_S + steps * spec.flops_per_step() / (ROUGH_GFLOPS * 1e9))


def duration_text(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:.0f} s"


def check_size(axes: dict[str, list], base_values: dict, confirmed: bool,
               limit: int = MAX_POINTS) -> None:
    """Refuse (ValueError) a sweep of more than ``limit`` points unless ``confirmed``."""
    n = point_count(axes)
    if n <= limit or confirmed:
        return
    sizes = " × ".join(f"--{k.replace('_', '-')} {len(v)}" for k, v in axes.items())
    raise ValueError(f"this sweep has {n:,} points ({sizes}), about "
                     f"{duration_text(estimate_s(n, base_values))} of measuring: more than "
                     f"{limit}. Narrow the ranges (a:b:step with a larger step), or pass "
                     "--yes to run it anyway")
