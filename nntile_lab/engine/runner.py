"""Running points: each in a fresh process by default, a record for each, a store for all.

Why a process per point (``isolate=True``):
- a StarPU abort, a segfault or the OOM killer ends that process, not the study (or the
  Jupyter kernel): the point becomes a record with status "error" and the reason;
- the memory cap is enforced on the process (like a GPU's memory on a job) and its peak is
  the point's own, not the high-water mark of everything run before;
- the start-up (Python, numpy, the extension, ``starpu_init``) is short against the
  seconds a point of a real model takes (BENCHMARKS.md, "Measurements formerly in code
  comments"), so no warm worker is kept.
``isolate=False`` runs the measurement in this process: no start-up, shares the caller's
StarPU (none may be running), the memory cap is measured but not enforced, and a StarPU
abort ends the caller.

Stopping: the stop token of the running action (``interrupts.check_stop``: a Stop button, a
kernel interrupt in any thread) and ``stop`` (anything with ``is_set()``) are checked every
50 ms while a point's process runs and between points; a stop or a Ctrl-C kills the point's
process (it runs in a session of its own, so only this process decides) and
``run_points`` raises ``Interrupted``. Finished
points are in the store already, so running the same points again resumes after them.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm.auto import tqdm

from nntile_lab.engine.facts import PACKAGE, environment
from nntile_lab.engine.point import Point
from nntile_lab.engine.record import make_record
from nntile_lab.engine.store import Store
from nntile_lab.engine.worker import PROVISIONAL, Context, execute
from nntile_lab.interrupts import Interrupted, Stopped, check_stop, stoppable
from nntile_lab.orphans import child_env

POLL_S = 0.05
RETRY = ("error", "timeout")   # the statuses ``retry_errors`` measures again


def _signal_text(code: int) -> str:
    if code >= 0:
        return f"exit status {code}"
    name = signal.Signals(-code).name
    hint = {"SIGABRT": " (a StarPU or C abort)", "SIGKILL": " (out of memory? the kernel's "
            "OOM killer sends SIGKILL)", "SIGSEGV": " (a crash in C code)"}.get(name, "")
    return f"killed by {name}{hint}"


def _check(stop) -> None:
    """Raise ``Stopped`` when this thread's action was asked to stop (``interrupts``: a
    Stop button, a kernel interrupt) or ``stop`` is set."""
    check_stop()
    if stop is not None and stop.is_set():
        raise Stopped("stopped")


def _kill(proc: subprocess.Popen) -> None:
    """The point's process and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):   # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _in_child(point: Point, trace_dir, stop) -> dict:
    env = child_env()   # the child dies with this process (nntile_lab.orphans)
    root = str(PACKAGE.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    timeout = point.caps.timeout_s
    with tempfile.TemporaryDirectory(prefix="nl-point-") as tmp:
        out, job_path, log_path = (Path(tmp) / n for n in ("out.json", "job.json", "log.txt"))
        job_path.write_text(json.dumps(point.job() | {
            "trace_dir": None if trace_dir is None else str(trace_dir), "out": str(out)}))
        t0 = time.perf_counter()
        with open(log_path, "w+") as log:
            proc = subprocess.Popen([sys.executable, "-m", "nntile_lab.engine.worker",
                                     str(job_path)], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=log, env=env, start_new_session=True)
            try:
                while True:
                    try:
                        proc.wait(timeout=POLL_S)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    _check(stop)
                    if timeout is not None and time.perf_counter() - t0 > timeout:
                        _kill(proc)
                        return {"status": "timeout", "wall_s": time.perf_counter() - t0,
                                "results": {},
                                "reason": f"timed out after {timeout:.0f} s (raise the "
                                          "point's time limit, or measure fewer steps)"}
            except BaseException:   # a stop, Ctrl-C: the point's process goes too
                _kill(proc)
                raise
            if out.exists():
                outcome = json.loads(out.read_text())
                if outcome.pop(PROVISIONAL, False):   # written, then the process died
                    outcome["reason"] = (
                        "StarPU aborted while shutting down, after the measurement ("
                        f"{_signal_text(proc.returncode)}; a StarPU 1.3 bug: "
                        "docs/reliability.md): the results were taken before it")
                return outcome
            log.seek(0)
            tail = " | ".join(log.read().strip().splitlines()[-4:])
        return {"status": "error", "results": {}, "wall_s": time.perf_counter() - t0,
                "reason": f"the point's process died: {_signal_text(proc.returncode)}"
                          + (f"; its output ended: {tail}" if tail else "")}


def run_point(point: Point, *, isolate: bool = True, trace_dir=None, stop=None,
              **extra) -> dict:
    """Measure ``point``; its record (``engine.record``). ``trace_dir``: where the
    measurement keeps its trace (the record's ``trace_dir`` when it fits);
    ``extra``: kept in the record."""
    if isolate:
        outcome = _in_child(point, trace_dir, stop)
    else:
        ctx = Context(point.options, point.inputs,
                      None if trace_dir is None else str(trace_dir))
        outcome = execute(point.measure, point.spec, ctx)
    kept = (trace_dir is not None and outcome["status"] == "fits"
            and Path(trace_dir).exists())
    env = environment() | (outcome.get("env") or {})
    return make_record(point.kind, point.spec, outcome.get("results"),
                       status=outcome["status"], reason=outcome.get("reason"),
                       measure=point.measure, options=point.options,
                       caps=point.caps.to_dict(), wall_s=outcome.get("wall_s"), env=env,
                       **({"trace_dir": str(trace_dir)} if kept else {}), **extra)


def refused(point: Point, reason: str, status: str = "error", **extra) -> dict:
    """The record of a point decided without running it (an invalid spec, a model the
    memory planner says cannot fit: status "oom")."""
    return make_record(point.kind, point.spec, {}, status=status, reason=reason,
                       measure=point.measure, options=point.options,
                       caps=point.caps.to_dict(), ran=False, **extra)


def _longer_limit(rec: dict, point: Point) -> bool:
    """A record that timed out under a shorter limit than ``point``'s."""
    was, now = rec["caps"].get("timeout_s"), point.caps.timeout_s
    return rec["status"] == "timeout" and was is not None and (now is None or now > was)


def measure_or_reuse(point: Point, store: Store | None, *, isolate: bool = True,
                     reuse: bool = True, retry_errors: bool = False, keep_trace: bool = False,
                     stop=None, messages: list | None = None) -> tuple[dict, bool]:
    """``(record, cached)``: the store's record of ``point`` when it has a usable one
    (measured by this code; one that failed is measured again with ``retry_errors``), else
    a fresh measurement, saved there at once."""
    key = point.key()
    if store is not None and reuse:
        rec, why = store.load(key, kind=point.kind)
        if why and messages is not None:
            messages.append(why)
        if rec is not None and _longer_limit(rec, point):
            if messages is not None:
                messages.append(f"cached point {key} timed out after "
                                f"{rec['caps']['timeout_s']:g} s: it runs again under "
                                f"{point.caps.timeout_s:g} s")
        elif rec is not None and not (retry_errors and rec["status"] in RETRY):
            return rec, True
    trace_dir = store.trace_dir(key) if store is not None and keep_trace else None
    if store is not None:
        store.drop_trace(key)
    rec = run_point(point, isolate=isolate, trace_dir=trace_dir, stop=stop)
    if store is not None:
        store.save(key, rec)
    return rec, False


def run_points(points, store: Store | None = None, *, isolate: bool = True,
               reuse: bool = True, retry_errors: bool = False, keep_trace: bool = False,
               stop=None, on_record=None, progress: bool = True, desc: str = "points",
               messages: list | None = None, kept: str = "kept") -> list[tuple]:
    """Every point of ``points`` in order: ``[(record, cached)]``; an item that is not a
    ``Point`` (a record decided without running: ``refused``) passes through as it is.
    ``on_record(record, cached)`` after each (widgets redraw there); a progress bar
    unless ``progress`` is False. A stop (``stop`` set, or this thread's stop token:
    ``interrupts``) or Ctrl-C raises ``Interrupted`` saying how many finished (they are
    in the store — "the finished ones are ``kept``" — run again to resume)."""
    points = list(points)
    out: list[tuple[dict, bool]] = []
    bar = tqdm(total=len(points), desc=desc, unit="point", disable=not progress,
               dynamic_ncols=True)
    try:
        with stoppable():
            for p in points:
                _check(stop)
                if isinstance(p, Point):
                    got = measure_or_reuse(p, store, isolate=isolate, reuse=reuse,
                                           retry_errors=retry_errors, keep_trace=keep_trace,
                                           stop=stop, messages=messages)
                else:
                    got = (p, False)
                out.append(got)
                bar.update(1)
                gflops = (got[0].get("results") or {}).get("gflops") \
                    if isinstance(got[0], dict) else None
                if isinstance(gflops, (int, float)):
                    bar.set_postfix({"GFLOP/s": f"{gflops:.1f}"}, refresh=False)
                if on_record is not None:
                    on_record(*got)
    except KeyboardInterrupt:
        tail = (f"; the finished ones are {kept}: run it again to resume"
                if store is not None else "")
        raise Interrupted(f"{desc} stopped after {len(out)} of {len(points)} points"
                          + tail) from None
    finally:
        bar.close()
    return out
