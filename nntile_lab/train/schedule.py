"""Learning-rate schedules: plain callables ``step -> lr`` (0-based optimizer step).

A schedule is a pure function of the step, never of state, so a resumed run gets exactly
the rates the uninterrupted run would have used.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Constant:
    """The same rate at every step."""

    lr: float

    def __call__(self, step: int) -> float:
        return self.lr


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warm-up to ``lr`` then cosine decay to ``min_lr`` (nanoGPT's schedule).

    Step ``s < warmup_steps`` gets ``lr·(s+1)/warmup_steps`` (never 0, so no step is
    wasted); from ``warmup_steps`` to ``total_steps`` the rate follows half a cosine from
    ``lr`` down to ``min_lr``; past ``total_steps`` it stays at ``min_lr``.
    """

    lr: float
    warmup_steps: int
    total_steps: int
    min_lr: float = 0.0

    def __post_init__(self):
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"min_lr must lie in [0, lr={self.lr}], got {self.min_lr}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.total_steps < self.warmup_steps:
            raise ValueError(f"total_steps={self.total_steps} must be >= warmup_steps="
                             f"{self.warmup_steps}")

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if step >= self.total_steps:
            return self.min_lr
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))


def to_record(schedule) -> dict | None:
    """A schedule as JSON (a checkpoint keeps it, so that a resumed run keeps it too);
    None for a schedule that is not one of these classes (a user's function)."""
    if isinstance(schedule, (Constant, WarmupCosine)):
        return {"kind": type(schedule).__name__, **asdict(schedule)}
    return None


def from_record(record: dict):
    """The schedule ``to_record`` wrote; ValueError naming what is wrong otherwise."""
    kinds = {"Constant": Constant, "WarmupCosine": WarmupCosine}
    try:
        record = dict(record)
        return kinds[record.pop("kind")](**record)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"a damaged learning-rate schedule record {record!r} ({exc})") from None


def describe(schedule) -> str:
    """The schedule in the CLI's words (--lr, --warmup, --steps, --min-lr)."""
    if isinstance(schedule, WarmupCosine):
        return (f"{schedule.warmup_steps} warm-up steps to lr {schedule.lr:g}, then a cosine "
                f"down to {schedule.min_lr:g} at step {schedule.total_steps}")
    if isinstance(schedule, Constant):
        return f"a constant lr {schedule.lr:g}"
    return repr(schedule)
