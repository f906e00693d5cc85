"""Predicting a tiling's step time before running it.

For each candidate spec: the step's task graph from a dry run of the model's very code
(``nntile_lab.nn.meta``: shape-only tensors, no StarPU) — the forward and backward tasks with
the tiles each reads and writes — and the optimizer's (its gradient-norm reduction, then,
after the norm is read, one update per parameter tile). Each task is priced by its
codelet's model (``tune.costs``), and the step is replayed on the spec's workers
(``tune.graph.simulate``). Measured points refine the prediction (``Predictor.learn``): their
traces refit the codelets' models and give the time Python takes to submit a task; what
remains between the replay and the measured step — per-step costs outside the tasks — is a
fitted scale (it moves every candidate alike, so it never changes the ranking, only the
budget's estimates).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nntile_lab.nn.config import model_class
from nntile_lab.spec import ExperimentSpec
from nntile_lab.tune import costs, graph

# how long Python takes to submit one task before any measurement (µs: the op's tile loop,
# cffi, starpu_task_submit); measured points replace it (``learn``)
PRIOR_SUBMIT_US = 30.0
HISTORY_WEIGHT = 10
# the optimizer's codelets' FLOPs per element (kernels/codelets.py)
OPTIMIZER_FLOPS = {"adamw": 17, "adam": 17, "sgd": 5, "sgd_momentum": 10}
SUMSQ_FLOPS = 2


@dataclass
class StepGraph:
    """A step's task graph in two phases: forward+backward with the gradient-norm
    reduction, then (after Python reads the norm) the optimizer's updates."""

    train: graph.Graph
    update: graph.Graph


class _Recording:
    """Wraps a dry run's ``task`` to keep each task's tiles (storage id, tile index)."""

    def __init__(self, dry):
        self.dry, self.reads, self.writes = dry, [], []
        self._task = dry.task
        dry.task = self.task

    def task(self, op, reads, writes, flops):
        self._task(op, reads, writes, flops)
        self.reads.append([(t.storage.id, i) for t, i in reads])
        self.writes.append([(t.storage.id, i) for t, i in writes])


@dataclass
class _Task:
    op: str
    flops: float
    nbytes: float
    priority: float
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)


def step_graph(spec: ExperimentSpec) -> StepGraph:
    """The task graph of one training step of ``spec``, from a dry run (no StarPU)."""
    # the dry run of the layers' code (nn.meta): loaded here, where a graph is asked for
    from nntile_lab.experiment import choose_precision
    from nntile_lab.nn import backend
    from nntile_lab.nn.meta import DryRun
    from nntile_lab.spec import parse_hints
    mode = spec.precision if spec.precision != "auto" else choose_precision(spec)[0]
    hints = parse_hints(spec.hints, spec.memory_limit_mb is not None)
    dry = DryRun(hints=hints, priorities=spec.priorities is not False)
    rec = _Recording(dry)
    previous = backend.set_dry_run(dry)
    try:
        model = _model(spec, mode)
        first = len(dry.tasks)
        ids = np.zeros((spec.batch, spec.seq_len), np.int64)
        for micro in range(spec.grad_accum):
            model.forward_backward(ids, ids, accumulate=micro > 0,
                                   grad_scale=1.0 / spec.grad_accum)
    finally:
        backend.set_dry_run(previous)
    tasks = [_Task(t.op, t.flops, t.nbytes, t.priority, r, w) for t, r, w in
             zip(dry.tasks[first:], rec.reads[first:], rec.writes[first:])]
    grads = list(model.grads.items())
    prio = getattr(model, "grad_norm_priority", 0) or 0
    # the global gradient norm: one reduction per gradient tile into one accumulator
    for name, g in grads:
        for i in range(g.ntiles):
            tasks.append(_Task("sumsq_all", SUMSQ_FLOPS * g.traits.tile_sizes[i],
                               g.tile_bytes(i) + 4, prio, [(("grad", name), i)],
                               [("norm", 0)]))
    update = []
    upd = spec.optimizer if spec.optimizer != "sgd" else "sgd_momentum"
    for name, p in model.params.items():
        for i in range(p.ntiles):
            n = p.traits.tile_sizes[i]
            state = 2 if upd in ("adamw", "adam") else 1
            update.append(_Task(upd, OPTIMIZER_FLOPS[upd] * n, 4 * n * (2 + state), 0,
                                [(("grad", name), i)],
                                [(("param", name), i)] + [((f"state{k}", name), i)
                                                          for k in range(state)]))
    return StepGraph(graph.build(tasks), graph.build(update))


def _model(spec: ExperimentSpec, mode: str):
    """The model the spec names (any model built from layers), on the dry run's shape-only
    tensors."""
    return model_class(spec.model)(spec.model_config(), seed=0, precision=mode)


def workers_of(spec: ExperimentSpec) -> int:
    """The workers a spec's run gets: ``ncpu`` (default every core, at most StarPU's
    build limit) plus its OpenCL and CUDA workers."""
    from nntile_lab.runtime import max_workers  # the compiled extension, when asked
    cpus = spec.ncpu or min(max_workers(), len(os.sched_getaffinity(0)))
    return cpus + spec.nopencl + spec.ncuda


@dataclass
class Prediction:
    """A candidate's predicted step (seconds) and what bounds it."""

    step_s: float
    replay_us: float
    critical_path_us: float
    work_per_worker_us: float
    submission_us: float
    tasks: int
    bound: str


class Predictor:
    """Predicts candidates' step times; ``learn`` from measured points refines it.

    ``history``: StarPU's saved per-codelet models (``perfmodels.history``: earlier
    calibrated runs on this machine) — their entries of the CPU workers are the first
    samples, each counted at most ``HISTORY_WEIGHT`` times (they were measured under other
    conditions than this tune's points)."""

    def __init__(self, prior_gflops: float, history: pd.DataFrame | None = None):
        self.model = costs.CostModel(prior_gflops)
        self.submit_us = PRIOR_SUBMIT_US
        self.scale = 1.0
        self.samples = pd.DataFrame(columns=["op", "flops", "bytes", "mean_us", "count"])
        if history is not None and len(history):
            h = history[(history["arch"] == "cpu") & history["flops"].notna()]
            self.samples = pd.DataFrame({
                "op": h["op"], "flops": h["flops"].astype(float),
                "bytes": h["size_bytes"].astype(float), "mean_us": h["mean_us"],
                "count": np.minimum(h["nsample"], HISTORY_WEIGHT)}).reset_index(drop=True)
            if len(self.samples):
                self.model = self.model.fit(self.samples)
        self._graphs: dict = {}
        self.pairs: list[tuple[float, float]] = []   # (replay µs, measured step s)

    def graph(self, spec: ExperimentSpec) -> StepGraph:
        key = spec.key()
        if key not in self._graphs:
            self._graphs[key] = step_graph(spec)
        return self._graphs[key]

    def replay(self, spec: ExperimentSpec) -> tuple[graph.Replay, graph.Replay]:
        sg, w = self.graph(spec), workers_of(spec)
        out = []
        for g in (sg.train, sg.update):
            dur = self.model.time_us(g.ops, g.flops, g.nbytes)
            out.append(graph.simulate(g, dur, w, self.submit_us))
        return out[0], out[1]

    def predict(self, spec: ExperimentSpec) -> Prediction:
        train, update = self.replay(spec)
        us = train.makespan_us + update.makespan_us
        return Prediction(us * 1e-6 * self.scale, us, train.critical_path_us,
                          train.work_per_worker_us + update.work_per_worker_us,
                          train.submission_us + update.submission_us,
                          train.tasks + update.tasks, train.bound)

    def per_codelet(self, spec: ExperimentSpec) -> pd.Series:
        """Predicted µs per step of each codelet's tasks of ``spec`` (the models' prices,
        before the replay: where a step's time goes, by codelet)."""
        sg = self.graph(spec)
        parts = [pd.Series(self.model.time_us(g.ops, g.flops, g.nbytes), index=list(g.ops))
                 for g in (sg.train, sg.update)]
        return pd.concat(parts).groupby(level=0).sum()

    def learn(self, spec: ExperimentSpec, tasks: pd.DataFrame, step_s: float) -> None:
        """A measured point: its trace's tasks (``Trace.tasks``) refit the codelets' models
        and the submission time; its measured step refits the scale."""
        new = costs.samples_from_tasks(tasks)
        both = pd.concat([self.samples, new], ignore_index=True) if len(self.samples) else new
        self.samples = (both.assign(total=both["mean_us"] * both["count"])
                        .groupby(["op", "flops", "bytes"], as_index=False)
                        .agg(total=("total", "sum"), count=("count", "sum")))
        self.samples["mean_us"] = self.samples["total"] / self.samples["count"]
        self.samples = self.samples.drop(columns="total")
        self.model = costs.CostModel(self.model.prior_gflops).fit(self.samples)
        submit = submission_us_per_task(tasks)
        if submit is not None:
            self.submit_us = submit if not self.pairs else 0.5 * (self.submit_us + submit)
        train, update = self.replay(spec)
        self.pairs.append((train.makespan_us + update.makespan_us, step_s))
        self.scale = float(np.median([s / (r * 1e-6) for r, s in self.pairs if r > 0]))


def submission_us_per_task(tasks: pd.DataFrame) -> float | None:
    """How long Python took to submit one task in a measured step: the mean gap between
    consecutive submissions, leaving out the gaps where Python waited (for the gradient
    norm, between steps: over ten times the median gap)."""
    if tasks.empty or "submit_us" not in tasks:
        return None
    gaps = np.diff(np.sort(tasks["submit_us"].to_numpy(float)))
    gaps = gaps[np.isfinite(gaps) & (gaps >= 0)]
    if not len(gaps):
        return None
    kept = gaps[gaps <= 10 * max(float(np.median(gaps)), 1e-3)]
    return float(kept.mean()) if len(kept) else None
