"""The process of one point: ``python -m nntile_lab.engine.worker JOB.json`` (started by
``engine.runner``; not a command of its own).

It reads the job (``Point.job()`` plus ``trace_dir`` and ``out``), dies with its parent
(``nntile_lab.orphans``), imports the point's ``imports``, runs the measurement under the
point's memory cap and writes the outcome (``{"status", "reason", "results", "wall_s",
"env"}``) to ``out`` atomically, then exits 0. Over the cap, the watchdog writes an "oom"
outcome and ends the process at once. A StarPU abort or the kernel's OOM killer ends it
without an outcome: the parent reads that from the exit status. ``execute`` is the same run
in the caller's process (``isolate=False``).

``NNTILE_LAB_POINT_FAULT=abort`` makes the worker abort before measuring (fault injection:
the tests check that a crashing point becomes an "error" record and the study goes on).
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import time

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import measures
from nntile_lab.engine.facts import cpu_variant, json_safe, versions
from nntile_lab.engine.memcap import MIB, MemoryCap
from nntile_lab.orphans import die_with_parent
from nntile_lab.shutdown import BEFORE_SHUTDOWN
from nntile_lab.spec import ExperimentSpec

FAULT_ENV = "NNTILE_LAB_POINT_FAULT"
# an outcome written before StarPU's shutdown, replaced by the final one once the process
# gets past it; one still there after the process died says where it died
PROVISIONAL = "provisional"


class Context:
    """What a measurement gets besides its spec: ``options`` (part of the point's key),
    ``inputs`` (not), ``trace_dir`` (where to keep a trace, or None), ``cap`` (the
    ``MemoryCap``: ``cap.start()`` once warmed up where the measurement ``starts_cap``,
    ``cap.check()`` at the end), ``partial`` (results known so far, kept when the cap
    ends the run) and ``finished(results)``: a measurement that knows its results before
    its runtime stops says so, and they survive an abort in StarPU's shutdown."""

    def __init__(self, options: dict | None = None, inputs: dict | None = None,
                 trace_dir: str | None = None, cap: MemoryCap | None = None):
        self.options, self.inputs = dict(options or {}), dict(inputs or {})
        self.trace_dir, self.cap = trace_dir, cap or MemoryCap(None)
        self.partial: dict = {}
        self.final: dict | None = None

    def finished(self, results: dict) -> None:
        """The measurement's whole results, known before its runtime stops."""
        self.final = dict(results)


def resolve(name: str):
    """The function of measurement ``name``."""
    module, _, func = measures.get(name).function.partition(":")
    return getattr(importlib.import_module(module), func)


def execute(name: str, spec: ExperimentSpec | None, ctx: Context) -> dict:
    """Run the measurement here: the outcome (status, reason, results, wall_s). A
    MemoryError (over the cap, ``nl.OutOfMemory``, Python's) is "oom"; any other error
    "error" with its type and message; KeyboardInterrupt propagates."""
    t0 = time.perf_counter()
    status, reason, results = "fits", None, {}
    try:
        fn = resolve(name)
        if ctx.cap.cap is not None and not measures.get(name).starts_cap:
            ctx.cap.start()
        results = fn(spec, ctx)
        ctx.cap.check()
    except MemoryError as exc:
        status, reason = "oom", f"{type(exc).__name__}: {exc}"
        results = ctx.partial | {"peak_mb": ctx.cap.used() / MIB if ctx.cap.started else None}
    except Exception as exc:   # the point's error is its record, not a crash of the study
        status, reason, results = "error", f"{type(exc).__name__}: {exc}", dict(ctx.partial)
    finally:
        ctx.cap.stop()
    return {"status": status, "reason": reason, "results": results,
            "wall_s": time.perf_counter() - t0}


def _write(path: str, outcome: dict) -> None:
    outcome = outcome | {"env": {"versions": versions(), "cpu_variant": cpu_variant()}}
    atomic_write_bytes(path, json.dumps(json_safe(outcome), default=str).encode())


def main(argv: list[str]) -> int:
    die_with_parent()   # a killed study leaves no orphan point
    with open(argv[0]) as f:
        job = json.load(f)
    t0 = time.perf_counter()

    def over(used: int) -> None:   # the watchdog's thread: record and end at once
        _write(job["out"], {"status": "oom", "reason": cap.reason(used), "wall_s":
                            time.perf_counter() - t0,
                            "results": ctx.partial | {"peak_mb": used / MIB}})
        os._exit(0)

    mb = job["caps"].get("memory_mb")
    cap = MemoryCap(None if mb is None else int(mb * MIB), over)
    ctx = Context(job.get("options"), job.get("inputs"), job.get("trace_dir"), cap)
    if os.environ.get(FAULT_ENV) == "abort":
        os.abort()

    def before_shutdown() -> None:   # (nntile_lab.shutdown: Runtime.stop() calls it)
        if ctx.final is not None:
            _write(job["out"], {"status": "fits", "reason": None, "results": ctx.final,
                                "wall_s": time.perf_counter() - t0, PROVISIONAL: True})
        if os.environ.get(FAULT_ENV) == "abort-at-shutdown":
            os.abort()   # fault injection: StarPU 1.3's abort in starpu_shutdown
    BEFORE_SHUTDOWN.append(before_shutdown)
    try:
        for module in job.get("imports") or ():   # e.g. one that registers a user's model
            importlib.import_module(module)
        spec = None if job.get("spec") is None else ExperimentSpec.from_dict(job["spec"])
    except (ImportError, TypeError, ValueError) as exc:   # a spec of another version
        _write(job["out"], {"status": "error", "reason": f"{type(exc).__name__}: {exc}",
                            "results": {}, "wall_s": 0.0})
        return 0
    _write(job["out"], execute(job["measure"], spec, ctx))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
