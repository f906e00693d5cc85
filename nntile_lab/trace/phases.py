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

``op_mix(tr, n_layer)`` splits the task time instead, by where the work is: the blocks'
GEMMs, their other kernels (layer norms, softmax, GELU, ...), the head's GEMMs (the tied
vocabulary projection, layer ``n_layer``), its other kernels (loss), the optimizer (the
norm and the updates) and the rest (embeddings, fills); with the blocks' and the head's
GEMM rate per worker. A deeper model moves task time from the head to the blocks: where
the two rates differ, the per-FLOP throughput moves with depth even when no worker idles.
"""
from __future__ import annotations

import numpy as np

from nntile_lab.trace.idle import step_windows

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
    for _, a, b in step_windows(tr):
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


MIX = ("block_gemm", "block_other", "head_gemm", "head_other", "optimizer", "other")


def op_mix(tr, n_layer: int) -> dict:
    """JSON-ready: ``<part>_task_share`` of all task time for each of ``MIX`` and
    ``block_gemm_gflops`` / ``head_gemm_gflops`` (GFLOP/s per worker while running)."""
    t = tr.tasks
    layer, gemm = t["layer"].to_numpy(), (t["name"] == "gemm").to_numpy()
    part = np.full(len(t), "other", dtype=object)
    block = (layer >= 0) & (layer < n_layer)
    part[block & gemm], part[block & ~gemm] = "block_gemm", "block_other"
    part[(layer == n_layer) & gemm], part[(layer == n_layer) & ~gemm] = "head_gemm", "head_other"
    part[(t["phase"] == "optimizer").to_numpy()] = "optimizer"
    dur, flops = t["duration_us"].to_numpy(dtype=float), t["flops"].to_numpy(dtype=float)
    total = dur.sum()
    out = {f"{p}_task_share": float(dur[part == p].sum() / total) if total else None
           for p in MIX}
    for p in ("block_gemm", "head_gemm"):
        us = dur[part == p].sum()
        out[f"{p}_gflops"] = float(flops[part == p].sum() / us / 1e3) if us else None
    return out
