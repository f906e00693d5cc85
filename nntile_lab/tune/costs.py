"""How long one task of a codelet takes: the per-codelet performance model a tune ranks with.

StarPU keeps, per codelet and arch, the mean time of each footprint it has run (a history
model: ``nntile_lab.perfmodels``); a tune must also price footprints nobody ran yet — the
tiles of the candidates. So each codelet gets a small linear model over what a task does,

    t(task) = latency + work / rate        (µs; work: FLOPs for a product, bytes otherwise)

(a product also pays per byte where its sizes say so: ``_fit_one``)

fitted (non-negative least squares, weighted by samples) to measured tasks: the durations in
the traces of a tune's measured points, the same durations StarPU's history models average.
Before any measurement the model is the machine's roofline: the sgemm peak per worker for
products, a memory bandwidth for the rest, and a latency per task (``prior``). A codelet
measured at sizes too alike to separate latency from rate keeps the prior's shape, scaled
to its measured mean (``fit``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# the prior's per-task latency (µs: StarPU's push/pop and the kernel's call) and the
# bandwidth one worker streams tiles at (bytes/µs ≈ GB/s / 1e3), before any measurement
PRIOR_LATENCY_US = 8.0
PRIOR_BANDWIDTH = 4_000.0
# codelets whose time follows their FLOPs (the products); the rest follow their bytes
COMPUTE_BOUND = ("gemm", "gemm16", "gemm_c16", "gemm_bf16", "softmax_gemm")
MIN_SIZES = 3      # distinct task sizes a codelet needs before its latency and rate are fitted
MIN_SPAN = 4.0     # … spanning this ratio of its largest to its smallest
EXACT_COUNT = 3    # samples of one exact task size before its own mean prices it


@dataclass
class Codelet:
    """One codelet's model: µs per task = latency + flops·per_flop + bytes·per_byte."""

    latency: float
    per_flop: float
    per_byte: float
    samples: int = 0

    def time_us(self, flops, nbytes):
        return self.latency + np.asarray(flops) * self.per_flop + \
            np.asarray(nbytes) * self.per_byte


@dataclass
class CostModel:
    """Per-codelet models; a codelet not seen yet takes the prior for its kind. A task
    whose exact size (codelet, FLOPs, bytes) was measured ``EXACT_COUNT`` times or more takes
    that size's measured mean — StarPU's history model, per footprint — and the fitted line
    prices the sizes nobody ran (where a product's efficiency on a given tile shape is
    what the line cannot know)."""

    prior_gflops: float                 # the sgemm rate of one worker (GFLOP/s)
    codelets: dict = field(default_factory=dict)
    exact: dict = field(default_factory=dict)   # (op, flops, bytes) → mean µs

    def prior(self, op: str) -> Codelet:
        rate = self.prior_gflops * 1e3            # FLOP per µs
        if op.startswith(COMPUTE_BOUND):
            return Codelet(PRIOR_LATENCY_US, 1.0 / rate, 0.0)
        return Codelet(PRIOR_LATENCY_US, 0.0, 1.0 / PRIOR_BANDWIDTH)

    def codelet(self, op: str) -> Codelet:
        return self.codelets.get(op) or self.prior(op)

    def time_us(self, ops, flops, nbytes) -> np.ndarray:
        """Predicted µs of tasks (arrays of op names, FLOPs, bytes)."""
        ops, flops, nbytes = np.asarray(ops), np.asarray(flops, float), np.asarray(nbytes, float)
        out = np.empty(len(ops))
        for op in np.unique(ops):
            at = ops == op
            out[at] = self.codelet(str(op)).time_us(flops[at], nbytes[at])
        if self.exact:
            for k, (op, f, b) in enumerate(zip(ops, flops, nbytes)):
                hit = self.exact.get((str(op), float(f), float(b)))
                if hit is not None:
                    out[k] = hit
        return out

    def fit(self, samples: pd.DataFrame) -> CostModel:
        """A model fitted to ``samples`` (columns op, flops, bytes, mean_us, count: one row
        per distinct task size of a codelet); codelets without samples keep theirs."""
        out = CostModel(self.prior_gflops, dict(self.codelets), dict(self.exact))
        for op, g in samples.groupby("op"):
            out.codelets[op] = _fit_one(self.prior(op), g)
        many = samples[samples["count"] >= EXACT_COUNT]
        out.exact.update({(str(o), float(f), float(b)): float(m) for o, f, b, m in
                          zip(many["op"], many["flops"], many["bytes"], many["mean_us"])})
        return out

    def table(self) -> pd.DataFrame:
        """One row per fitted codelet: latency µs, GFLOP/s, GB/s, samples."""
        rows = [{"op": op, "latency_us": c.latency,
                 "gflops": 1e-3 / c.per_flop if c.per_flop > 0 else None,
                 "gb_s": 1e-3 / c.per_byte if c.per_byte > 0 else None, "samples": c.samples}
                for op, c in sorted(self.codelets.items())]
        return pd.DataFrame(rows, columns=["op", "latency_us", "gflops", "gb_s", "samples"])


def _fit_one(prior: Codelet, g: pd.DataFrame) -> Codelet:
    """A codelet's model from its samples. Its work is its FLOPs (a product) or its bytes
    (the rest): with sizes spanning ``MIN_SPAN``× or more, latency and rate are fitted
    (non-negative least squares) — for a product also a cost per byte, which is what its
    efficiency losing to a tile's shape looks like (a skinny or small product moves more
    bytes per FLOP: t = latency + FLOPs / rate + bytes / bandwidth is the roofline's
    saturation); with fewer, the prior's shape is scaled to meet the measured mean — from
    one tiling's few sizes a free fit would extrapolate wildly to other candidates' tiles."""
    w = np.sqrt(g["count"].to_numpy(float))
    y = g["mean_us"].to_numpy(float)
    flops, nbytes = g["flops"].to_numpy(float), g["bytes"].to_numpy(float)
    compute = prior.per_flop > 0
    x = flops if compute else nbytes
    n = int(g["count"].sum())
    if len(np.unique(x)) >= MIN_SIZES and x.min() > 0 and x.max() >= MIN_SPAN * x.min():
        cols = [np.ones(len(g)), x] + ([nbytes] if compute and len(np.unique(x)) >=
                                      MIN_SIZES + 2 else [])
        coef = _nnls(np.column_stack(cols) * w[:, None], y * w)
        if coef is not None and np.isfinite(coef).all() and coef[1] > 0:
            per_byte = coef[2] if len(coef) > 2 else 0.0
            return Codelet(coef[0], coef[1] if compute else 0.0,
                           per_byte if compute else coef[1], samples=n)
    base = prior.time_us(flops, nbytes)
    scale = float(np.average(y, weights=w ** 2) / max(np.average(base, weights=w ** 2), 1e-9))
    return Codelet(prior.latency * scale, prior.per_flop * scale, prior.per_byte * scale,
                   samples=n)


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Non-negative least squares by enumerating the active sets (few columns)."""
    best, best_err = None, np.inf
    cols = A.shape[1]
    scale = np.maximum(np.abs(A).max(axis=0), 1e-30)
    As = A / scale
    for mask in range(1, 2 ** cols):
        idx = [j for j in range(cols) if mask >> j & 1]
        coef, *_ = np.linalg.lstsq(As[:, idx], b, rcond=None)
        if (coef < 0).any():
            continue
        err = float(np.sum((As[:, idx] @ coef - b) ** 2))
        if err < best_err:
            full = np.zeros(cols)
            full[idx] = coef
            best, best_err = full / scale, err
    return best


def samples_from_tasks(tasks: pd.DataFrame) -> pd.DataFrame:
    """A trace's task table (``name``, ``flops``, ``bytes``, ``duration_us``) as samples:
    one row per (codelet, FLOPs, bytes) with its mean time and count."""
    if tasks.empty:
        return pd.DataFrame(columns=["op", "flops", "bytes", "mean_us", "count"])
    g = tasks.groupby(["name", "flops", "bytes"])["duration_us"].agg(["mean", "count"])
    g = g.reset_index().rename(columns={"name": "op", "mean": "mean_us"})
    return g[["op", "flops", "bytes", "mean_us", "count"]]
