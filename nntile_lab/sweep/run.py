"""Running a sweep: cache look-up, one point at a time, a row per point, progress.

Each point runs in a fresh subprocess by default (``isolate=True``):
- a StarPU abort, a segfault or the OOM killer ends that process, not the sweep (or the
  Jupyter kernel): the point becomes a row with the error;
- the peak RSS is the point's own, not the high-water mark of everything run before;
- the start-up (Python, numpy, pandas, the extension, ``starpu_init``) is short against
  the seconds a point of a real model takes (BENCHMARKS.md, "Measurements formerly in code
  comments"), so no warm worker is kept.
``isolate=False`` runs points in this process (``measure``): no start-up, shares the
kernel's StarPU (none may be running), and a StarPU abort kills the kernel.
Every finished point is written to the cache at once, so an interrupted sweep (Ctrl-C,
"interrupt kernel", a crash) keeps its finished points and a re-run resumes after them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from nntile_lab import memory, sgemm_peak
from nntile_lab.interrupts import Interrupted
from nntile_lab.orphans import child_env
from nntile_lab.spec import ExperimentSpec, field_names
from nntile_lab.sweep.cache import Cache, code_version
from nntile_lab.sweep.grid import InvalidSpec
from nntile_lab.sweep.measure import measure

METRICS = ("gflops", "gflops_min", "gflops_max", "tokens_per_s", "mfu", "step_time_s",
           "step_time_min_s", "step_time_max_s", "utilisation", "idle_share",
           "overhead_share", "waiting_share", "both_idle_submission_share",
           "critical_path_s", "makespan_s", "critical_path_ratio", "peak_rss_mb",
           "starpu_peak_mb", "tasks_per_step", "workers", "peak_gflops", "point_wall_s")
INFO = ("error", "cached", "key", "trace_dir")
POINT_TIMEOUT_S = 600.0   # a point still running after this is a row with a timeout error


def precheck(spec: ExperimentSpec) -> str | None:
    """Why a valid spec cannot run here (unknown scheduler, too many workers, a model that
    does not fit), found without starting a process; None when it may run."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import max_workers, scheduler_names
    names = scheduler_names()
    if spec.scheduler not in names:
        return f"unknown scheduler {spec.scheduler!r}; valid ones: {', '.join(names)}"
    if spec.ncpu is not None and spec.ncpu > max_workers():
        return (f"ncpu={spec.ncpu} exceeds this StarPU build's {max_workers()} CPU workers "
                "(STARPU_MAXCPUS)")
    try:
        memory_check(spec)
    except Exception as exc:   # the planner's verdict (or its failure) is the point's error
        return str(exc)
    return None


def memory_check(spec: ExperimentSpec) -> None:
    """The memory planner's ``check``: raises when the model cannot run under the spec's
    memory cap."""
    memory.check(spec)


def _signal_text(code: int) -> str:
    if code >= 0:
        return f"exit status {code}"
    name = signal.Signals(-code).name
    hint = {"SIGABRT": " (a StarPU or C abort)", "SIGKILL": " (out of memory? the kernel's "
            "OOM killer sends SIGKILL)", "SIGSEGV": " (a crash in C code)"}.get(name, "")
    return f"killed by {name}{hint}"


def run_isolated(spec: ExperimentSpec, peak_gflops, trace_dir, timeout_s: float) -> dict:
    """``{"results": ...}`` or ``{"error": ...}`` from a fresh process
    (``nntile-lab _sweep-point``: sweep.worker)."""
    root = str(Path(__file__).resolve().parents[2])
    env = child_env()   # the child dies with this process (nntile_lab.orphans)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="nl-sweep-") as tmp:
        out = Path(tmp) / "out.json"
        job = {"spec": spec.to_dict(), "peak_gflops": peak_gflops,
               "trace_dir": None if trace_dir is None else str(trace_dir), "out": str(out)}
        try:
            proc = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "_sweep-point"],
                                  input=json.dumps(job), capture_output=True, text=True,
                                  env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s (raise timeout_s, or use "
                             "smaller measure_steps)"}
        if out.exists():
            return json.loads(out.read_text())
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        return {"error": f"the point's process died: {_signal_text(proc.returncode)}"
                         + (f"; stderr: {tail}" if tail else "")}


def _row(values: dict, results: dict | None, **info) -> dict:
    row = {name: values.get(name) for name in field_names()}
    results = results or {}
    row.update({m: results.get(m) for m in METRICS})
    for cat, mb in (results.get("memory_by_category") or {}).items():
        row[f"mem_{cat.replace(' ', '_')}_mb"] = mb
    row.update({k: info.get(k) for k in INFO})
    return row


def run(specs, cache_dir=None, *, isolate: bool = True, progress: bool = True,
        on_point=None, peak_gflops: float | None = None, keep_traces: bool = True,
        timeout_s: float = POINT_TIMEOUT_S, retry_errors: bool = False) -> pd.DataFrame:
    """Measure every point of ``specs`` (ExperimentSpec or InvalidSpec, e.g. from
    ``grid``); return one row per point: the spec's fields, the numbers of
    ``sweep.measure``, ``error`` (None or the message), ``cached``, ``key``, ``trace_dir``.

    ``cache_dir`` (default ``~/.cache/nntile_lab/sweep``, ``$NNTILE_LAB_CACHE``) holds
    finished points; points run earlier with the same code are read from it, points that
    failed are retried only with ``retry_errors``. ``on_point(row)`` is called after each
    point (the widgets redraw from it). ``peak_gflops`` defaults to ``nntile_lab.sgemm_peak``'s
    cached sgemm peak. ``df.attrs["messages"]`` lists what was ignored and why (corrupt
    or outdated cache files).
    """
    specs = list(specs)
    peak_gflops = sgemm_peak.check_peak(peak_gflops)
    cache = Cache(cache_dir)
    messages: list[str] = []
    own_peak = peak_gflops is None and any(isinstance(s, ExperimentSpec) for s in specs)
    if own_peak:
        peak_gflops = sgemm_peak.gflops()
    rows = []
    bar = tqdm(total=len(specs), desc="sweep", unit="point", disable=not progress,
               dynamic_ncols=True)
    try:
        for spec in specs:
            row = _point(spec, cache, messages, isolate=isolate, peak_gflops=peak_gflops,
                         keep_traces=keep_traces, timeout_s=timeout_s,
                         retry_errors=retry_errors)
            rows.append(row)
            bar.update(1)
            if row["gflops"] is not None:
                bar.set_postfix({"GFLOP/s": f"{row['gflops']:.1f}"}, refresh=False)
            if on_point is not None:
                on_point(row)
    except KeyboardInterrupt:
        raise Interrupted(f"sweep stopped after {len(rows)} of {len(specs)} points; the "
                          "finished ones are cached: run it again to resume") from None
    finally:
        bar.close()
    df = pd.DataFrame.from_records(rows, columns=list(rows[0]) if rows else
                                   [*field_names(), *METRICS, *INFO])
    for col in ("error", "key", "trace_dir"):       # None, not NaN, where absent
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    fastest = df["gflops"].max() if len(df) else None
    if own_peak and fastest is not None and fastest > peak_gflops:
        # a point beat the cached peak: that peak was measured on busy cores
        better = sgemm_peak.gflops(at_least=float(fastest))
        mine = df["peak_gflops"] == peak_gflops
        df.loc[mine, "mfu"] = df.loc[mine, "gflops"] / better
        df.loc[mine, "peak_gflops"] = better
        messages.append(f"a point ran at {fastest:.1f} GFLOP/s, above the cached sgemm peak "
                        f"of {peak_gflops:.1f}: peak measured again, {better:.1f}; MFU "
                        "recomputed")
    df.attrs["messages"] = messages
    df.attrs["code_version"] = code_version()
    return df


def _point(spec, cache: Cache, messages: list, *, isolate, peak_gflops, keep_traces,
           timeout_s, retry_errors) -> dict:
    if isinstance(spec, InvalidSpec):
        return _row(spec.values, None, error=spec.error, cached=False)
    if not isinstance(spec, ExperimentSpec):
        raise TypeError(f"a sweep point must be an ExperimentSpec or InvalidSpec, got "
                        f"{type(spec).__name__}")
    key = spec.key()
    values = spec.to_dict()
    reason = precheck(spec)
    if reason is not None:
        return _row(values, None, error=reason, cached=False, key=key)
    rec, why = cache.load(key)
    if why:
        messages.append(why)
    if rec is not None and not (retry_errors and rec.get("error")):
        return _row(values, rec["results"], error=rec.get("error"), cached=True, key=key,
                    trace_dir=rec.get("trace_dir"))
    trace_dir = cache.trace_dir(key) if keep_traces else None
    cache.drop_trace(key)
    if isolate:
        out = run_isolated(spec, peak_gflops, trace_dir, timeout_s)
    else:
        t0 = time.perf_counter()
        try:
            out = {"results": measure(spec, peak_gflops=peak_gflops,
                                      trace_dir=None if trace_dir is None else str(trace_dir))}
        except Exception as exc:   # the point's error becomes its row
            out = {"error": f"{type(exc).__name__}: {exc}",
                   "results": {"point_wall_s": time.perf_counter() - t0}}
    error = out.get("error")
    has_trace = trace_dir is not None and error is None
    cache.save(spec, out.get("results") or {}, error, has_trace)
    return _row(values, out.get("results"), error=error, cached=False, key=key,
                trace_dir=str(trace_dir) if has_trace else None)
