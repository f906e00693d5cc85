"""Running a sweep: a point per spec through the engine, a row per point, progress.

Each spec is an engine point (``nntile_lab.engine``: measurement ``train-trace``, kind
``sweep-point``), run in a fresh process by default — why, and what ``isolate=False``
changes, is the engine's docstring (``engine.runner``). Every finished point is written
to the store at once, so an interrupted sweep (Ctrl-C, "interrupt kernel", a Stop button,
a crash) keeps its finished points and a re-run resumes after them.

A spec that cannot run is a row too, decided without a process: an ``InvalidSpec``
(a tile larger than its dimension), an unknown scheduler or too many workers (status
"error"), a model the memory planner says cannot fit (status "oom").
"""
from __future__ import annotations

import pandas as pd

from nntile_lab import memory, sgemm_peak
from nntile_lab.engine import Caps, Point, Store, code_version, refused, run_points
from nntile_lab.engine.point import DEFAULT_TIMEOUT_S
from nntile_lab.memory import MemoryPlanError
from nntile_lab.nn.config import MODELS
from nntile_lab.spec import ExperimentSpec, field_names
from nntile_lab.sweep.grid import InvalidSpec

METRICS = ("gflops", "gflops_min", "gflops_max", "tokens_per_s", "mfu", "step_time_s",
           "step_time_min_s", "step_time_max_s", "utilisation", "idle_share",
           "overhead_share", "waiting_share", "both_idle_submission_share",
           "critical_path_s", "makespan_s", "critical_path_ratio", "peak_rss_mb",
           "starpu_peak_mb", "tasks_per_step", "workers", "peak_gflops", "point_wall_s")
INFO = ("status", "error", "cached", "key", "trace_dir")
POINT_TIMEOUT_S = DEFAULT_TIMEOUT_S   # a point still running after this is a timeout row
KIND = "sweep-point"
MEASURE = "train-trace"


def precheck(spec: ExperimentSpec) -> tuple[str, str] | None:
    """``(status, why)`` when a valid spec cannot run here (unknown scheduler, too many
    workers: "error"; a model that does not fit: "oom"), found without starting a
    process; None when it may run."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import max_workers, scheduler_names
    names = scheduler_names()
    if spec.scheduler not in names:
        return "error", f"unknown scheduler {spec.scheduler!r}; valid ones: {', '.join(names)}"
    if spec.ncpu is not None and spec.ncpu > max_workers():
        return "error", (f"ncpu={spec.ncpu} exceeds this StarPU build's {max_workers()} CPU "
                         "workers (STARPU_MAXCPUS)")
    try:
        memory_check(spec)
    except MemoryPlanError as exc:   # the planner's verdict: it cannot fit
        return "oom", str(exc)
    except Exception as exc:   # the planner's failure is the point's error
        return "error", str(exc)
    return None


def memory_check(spec: ExperimentSpec) -> None:
    """The memory planner's ``check``: raises when the model cannot run under the spec's
    memory cap."""
    memory.check(spec)


def sweep_point(spec: ExperimentSpec, *, timeout_s: float = POINT_TIMEOUT_S,
                peak_gflops: float | None = None, kind: str = KIND) -> Point:
    """The engine point of one sweep spec: any model built from layers (``spec.model``);
    its process first imports the module that defines (and registers) the model."""
    return Point(MEASURE, spec, caps=Caps(timeout_s=timeout_s), kind=kind,
                 inputs={"peak_gflops": peak_gflops}, imports=model_imports(spec))


def model_imports(spec: ExperimentSpec) -> tuple[str, ...]:
    """The module a fresh process imports to know ``spec.model`` (its registration), or
    none for a model defined in this process only (``__main__``: a notebook's class; its
    points run here: ``isolate=False``, ``check_importable``)."""
    target = MODELS[spec.model][1]
    module = target.split(":")[0] if isinstance(target, str) else target.__module__
    return () if module == "__main__" else (module,)


def check_importable(spec: ExperimentSpec) -> None:
    """ValueError when ``spec.model`` is a class defined in this process only: a point's own
    process cannot build it."""
    target = MODELS[spec.model][1]
    if not isinstance(target, str) and target.__module__ == "__main__":
        raise ValueError(f"model {spec.model!r} ({target.__qualname__}) is defined in this "
                         "notebook or script only: a point's own process cannot build it. "
                         "Measure in this process (isolate=False, --in-process), or define "
                         "it in an importable module")


def row(values: dict, rec: dict | None, cached: bool = False, key: str | None = None,
        peak_gflops: float | None = None) -> dict:
    """A sweep's row: the spec's fields, the measurement's numbers (``METRICS``; MFU
    against ``peak_gflops`` where given), memory by category, and ``INFO``."""
    out = {name: values.get(name) for name in field_names()}
    results = (rec or {}).get("results") or {}
    out.update({m: results.get(m) for m in METRICS})
    if peak_gflops and isinstance(out["gflops"], (int, float)):
        out["peak_gflops"], out["mfu"] = peak_gflops, out["gflops"] / peak_gflops
    for cat, mb in (results.get("memory_by_category") or {}).items():
        out[f"mem_{cat.replace(' ', '_')}_mb"] = mb
    status = None if rec is None else rec["status"]
    out.update({"status": status, "error": None if status in (None, "fits") else rec["reason"],
                "cached": cached, "key": key,
                "trace_dir": None if rec is None else rec.get("trace_dir")})
    return out


def points_of(specs, *, timeout_s: float, peak_gflops: float | None, kind: str = KIND):
    """``[(values, item)]``: each spec's values and its engine point, the record of a point
    decided without running (``engine.refused``), or the ``InvalidSpec`` itself."""
    out = []
    for spec in specs:
        if isinstance(spec, InvalidSpec):
            out.append((spec.values, spec))
            continue
        if not isinstance(spec, ExperimentSpec):
            raise TypeError(f"a sweep point must be an ExperimentSpec or InvalidSpec, got "
                            f"{type(spec).__name__}")
        p = sweep_point(spec, timeout_s=timeout_s, peak_gflops=peak_gflops, kind=kind)
        why = precheck(spec)
        out.append((spec.to_dict(), p if why is None else refused(p, why[1], why[0],
                                                                  key=p.key())))
    return out


def run(specs, cache_dir=None, *, isolate: bool = True, progress: bool = True,
        on_point=None, peak_gflops: float | None = None, keep_traces: bool = True,
        timeout_s: float = POINT_TIMEOUT_S, retry_errors: bool = False,
        stop=None) -> pd.DataFrame:
    """Measure every point of ``specs`` (ExperimentSpec or InvalidSpec, e.g. from
    ``grid``); return one row per point: the spec's fields, the numbers of
    ``sweep.measure``, ``status`` (the engine's: fits, oom, timeout, error), ``error``
    (None or the reason), ``cached``, ``key``, ``trace_dir``.

    ``cache_dir`` (default ``~/.cache/nntile_lab/sweep``, ``$NNTILE_LAB_CACHE``) is the
    engine store of finished points; points run earlier with the same code are read from
    it, points that failed are retried only with ``retry_errors``. ``on_point(row)`` is
    called after each point (the widgets redraw from it). ``peak_gflops`` defaults to
    ``nntile_lab.sgemm_peak``'s cached sgemm peak. ``stop``: an event that ends the sweep
    (as a kernel interrupt or a Stop button does). ``df.attrs["messages"]`` lists what
    was ignored and why (corrupt or outdated records)."""
    specs = list(specs)
    if isolate:
        for s in {s.model: s for s in specs if isinstance(s, ExperimentSpec)}.values():
            check_importable(s)
    peak_gflops = sgemm_peak.check_peak(peak_gflops)
    store = Store(cache_dir)
    messages: list[str] = []
    own_peak = peak_gflops is None and any(isinstance(s, ExperimentSpec) for s in specs)
    if own_peak:
        peak_gflops = sgemm_peak.gflops()
    items = points_of(specs, timeout_s=timeout_s, peak_gflops=peak_gflops)
    rows = []

    def add(rec, cached):
        values, item = items[len(rows)]
        if isinstance(item, InvalidSpec):
            out = row(values, None) | {"status": "error", "error": item.error}
        else:
            key = item.key() if isinstance(item, Point) else item.get("key")
            out = row(values, rec, cached, key, peak_gflops)
        rows.append(out)
        if on_point is not None:
            on_point(out)

    run_points([item for _, item in items], store, isolate=isolate,
               retry_errors=retry_errors, keep_trace=keep_traces, stop=stop, on_record=add,
               progress=progress, desc="sweep", messages=messages, kept="cached")
    df = pd.DataFrame.from_records(rows, columns=list(rows[0]) if rows else
                                   [*field_names(), *METRICS, *INFO])
    for col in ("status", "error", "key", "trace_dir"):       # None, not NaN, where absent
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
