"""Where a training step's wall time goes, phase by phase, from a trace.

A step is: the forward and backward (tasks tagged forward/backward), then the optimizer,
which starts only once the global gradient norm is known (clipping: ``sumsq_all`` over
every gradient, read from Python), then the updates. Per marked step, cut at the last
forward/backward task's end and at the first update's start:

  fwd_bwd      step start → last forward/backward task end
  norm         → first optimizer update start: the gradient-norm tail (its tasks, the
               read into Python, the first updates' submission)
  optimizer    → step end (the updates; the step ends when its last task ends)

and for each part its worker utilisation (busy worker time / (workers × its wall
time)). ``phase_split(tr)`` averages the parts over the marked steps, in ms and as
shares of the step; it says which part grows faster than the FLOPs with depth.
"""
from __future__ import annotations

import numpy as np

from nntile_lab.trace.idle import _windows

NORM_OPS = ("sumsq_all",)
PARTS = ("fwd_bwd", "norm", "optimizer")


def _busy(t, a: float, b: float) -> float:
    s = np.clip(t["start_us"].to_numpy(), a, b)
    e = np.clip(t["end_us"].to_numpy(), a, b)
    return float((e - s).sum())


def phase_split(tr) -> dict:
    """JSON-ready: ``<part>_ms`` (mean per step), ``<part>_share`` of the step and
    ``<part>_utilisation`` for each of ``PARTS`` (see the module docstring), and
    ``step_ms``."""
    t = tr.tasks
    workers = max(len(set(t["worker"]) | set(tr.workers.get("worker", []))), 1)
    sums = {f"{p}_{k}": 0.0 for p in PARTS for k in ("us", "busy_us")}
    total, steps = 0.0, 0
    for _, a, b in _windows(tr):
        mine = t[(t["end_us"] > a) & (t["start_us"] < b)]
        fb = mine[mine["phase"].isin(("forward", "backward"))]
        upd = mine[(mine["phase"] == "optimizer") & ~mine["name"].isin(NORM_OPS)]
        if not len(fb) or not len(upd):
            continue
        cut1 = float(fb["end_us"].max())
        cut2 = max(float(upd["start_us"].min()), cut1)
        for part, (lo, hi) in zip(PARTS, ((a, cut1), (cut1, cut2), (cut2, b))):
            sums[f"{part}_us"] += hi - lo
            sums[f"{part}_busy_us"] += _busy(mine, lo, hi)
        total += b - a
        steps += 1
    out = {"steps": steps, "step_ms": total / steps / 1e3 if steps else None}
    for part in PARTS:
        us = sums[f"{part}_us"]
        out[f"{part}_ms"] = us / steps / 1e3 if steps else None
        out[f"{part}_share"] = us / total if total else None
        out[f"{part}_utilisation"] = sums[f"{part}_busy_us"] / (workers * us) if us else None
    return out
