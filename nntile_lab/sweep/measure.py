"""One sweep point, in this process: warm-up steps, then measured steps under a trace.

The numbers (per point):
- ``step_time_s`` median seconds of the measured steps (``_min``/``_max``: the spread),
  each step timed from submission to the last task's end (the step waits for its tasks);
- ``gflops`` model FLOPs per step (``spec.flops_per_step()``, 6·N + 12·L·E·T per token, the
  trainer's count) over step time: median, ``gflops_min``/``gflops_max``;
- ``tokens_per_s`` median; ``mfu`` = median GFLOP/s / the machine's sgemm peak;
- ``utilisation`` mean over workers of busy / makespan (``trace.metrics.utilisation``);
- ``idle_share`` = 1 − busy worker time / (workers × Σ step wall time): the share of the
  measured wall time the workers sat idle, including waits on Python submission;
- ``overhead_share``, ``waiting_share``: worker time not executing kernels although a
  task was ready (the runtime's own cost) and with nothing ready, and
  ``both_idle_submission_share``: step time when no worker ran a task because Python had
  not submitted the next one yet (``trace.idle``);
- ``critical_path_s`` and ``makespan_s`` per measured step (the trace's totals over the
  steps, ``trace.metrics``), ``critical_path_ratio`` their ratio;
- ``peak_rss_mb`` the process's peak resident memory during the point (Linux VmHWM,
  reset before the point), ``starpu_peak_mb`` StarPU's own accounting peak, and
  ``memory_by_category`` (parameters, gradients, optimizer state, activations).

Batches are random tokens (throughput does not depend on the text); profiling is on for
the measured steps (the trace needs it; it costs a few per cent of step time).
"""
from __future__ import annotations

import os
import time

import numpy as np

from nntile_lab.rss import peak_rss_mb, reset_peak_rss
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace import idle, metrics

MiB = float(1 << 20)


def measure_point(spec: ExperimentSpec, ctx) -> dict:
    """The engine's measurement ``train-trace`` (``engine.measures``): ``measure`` with
    the point's sgemm peak (``ctx.inputs``) and trace folder; its results go to
    ``ctx.finished`` before the runtime stops (kept through an abort in StarPU's shutdown).
    With the input ``calibrate`` StarPU records every task's time in its per-codelet models
    (``STARPU_CALIBRATE=1``, read when the runtime starts; saved on disk at its end):
    ``tune``'s points feed the models the next tunes start from (``perfmodels.history``).
    Every runtime calibrates anyway (conf.calibrate = 1 in ``kernels/runtime/init.c``); the
    input says it where tune relies on it."""
    if ctx.inputs.get("calibrate"):
        os.environ["STARPU_CALIBRATE"] = "1"   # this process measures one point only
    return measure(spec, peak_gflops=ctx.inputs.get("peak_gflops"), trace_dir=ctx.trace_dir,
                   finished=ctx.finished)


def measure(spec: ExperimentSpec, *, peak_gflops: float | None = None,
            trace_dir: str | None = None, finished=None) -> dict:
    """Run one point here and return its numbers (see the module docstring). With
    ``trace_dir`` the trace's tables are saved there (``Trace.load`` reads them). The
    numbers are taken once the trace stops, before the runtime does, and given to
    ``finished(results)`` there if given (``point_wall_s`` then grows by the shutdown)."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.trace import training

    reset_peak_rss()
    t0 = time.perf_counter()
    taken: dict = {}

    def take(tr, memory) -> None:   # before StarPU stops
        taken.update(_numbers(spec, tr, memory, time.perf_counter() - t0, peak_gflops,
                              trace_dir))
        if finished is not None:
            finished(taken)

    training.run_for_trace(spec, spec.measure_steps, data="random",
                           warmup_steps=spec.warmup_steps, before_stop=take)
    return taken | {"point_wall_s": time.perf_counter() - t0}


def _numbers(spec: ExperimentSpec, tr, memory, wall: float, peak_gflops, trace_dir) -> dict:
    tokens = spec.tokens_per_step()
    if memory and not tr.static_memory:
        tr.static_memory = {k: v for k, v in memory.items() if k != "activations"}
    if trace_dir is not None:
        tr.save(trace_dir)
    seconds = tr.steps["seconds"].to_numpy(dtype=float)
    rates = spec.flops_per_step() / seconds / 1e9
    n = len(seconds)
    s = metrics.summary(tr, peak_gflops=peak_gflops)
    util = metrics.utilisation(tr)
    busy_s = float(util["busy_us"].sum()) * 1e-6
    workers = max(len(util), 1)
    gflops = float(np.median(rates))
    gaps = idle.breakdown(tr)
    return {
        "step_time_s": float(np.median(seconds)), "step_time_min_s": float(seconds.min()),
        "step_time_max_s": float(seconds.max()),
        "gflops": gflops, "gflops_min": float(rates.min()), "gflops_max": float(rates.max()),
        "tokens_per_s": float(np.median(tokens / seconds)),
        "mfu": gflops / peak_gflops if peak_gflops else None, "peak_gflops": peak_gflops,
        "utilisation": s["utilisation_mean"],
        "idle_share": max(0.0, 1.0 - busy_s / (workers * float(seconds.sum()))),
        "overhead_share": gaps["overhead_share"], "waiting_share": gaps["waiting_share"],
        "both_idle_submission_share": gaps["both_idle_submission_share"],
        "critical_path_s": s["critical_path_s"] / n, "makespan_s": s["makespan_s"] / n,
        "critical_path_ratio": s["critical_path_ratio"],
        "tasks_per_step": s["tasks"] / n, "workers": workers,
        "peak_rss_mb": peak_rss_mb(), "starpu_peak_mb": s["memory_peak_bytes"] / MiB,
        "memory_by_category": {k: v / MiB for k, v in (s["memory_by_category"] or {}).items()},
        "flops_per_step": spec.flops_per_step(), "tokens_per_step": tokens,
        "measured_steps": n, "point_wall_s": wall, "pid": os.getpid()}
