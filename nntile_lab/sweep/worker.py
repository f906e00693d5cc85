"""One sweep point in a fresh process: ``nntile-lab _sweep-point < job.json`` (hidden).

The job is ``{"spec": {...}, "peak_gflops": float | None, "trace_dir": str | None,
"out": path}``; the worker writes ``{"results": {...}}`` or ``{"error": "..."}`` to
``out`` (atomically) and exits 0. A StarPU abort or the kernel's OOM killer ends the
process instead: the parent reads that from the exit status.

``NNTILE_LAB_SWEEP_FAULT=abort`` makes the worker abort before measuring (fault
injection: the tests use it to check that a crashing point becomes an error row).
"""
from __future__ import annotations

import json
import os
import sys

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.orphans import die_with_parent
from nntile_lab.record import json_safe
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep.measure import measure


def main() -> int:
    die_with_parent()   # a killed sweep leaves no orphan point
    job = json.load(sys.stdin)

    spec = ExperimentSpec.from_dict(job["spec"])
    if os.environ.get("NNTILE_LAB_SWEEP_FAULT") == "abort":
        os.abort()
    try:
        out = {"results": measure(spec, peak_gflops=job["peak_gflops"],
                                  trace_dir=job["trace_dir"])}
    except Exception as exc:      # the point's error, reported as its row
        out = {"error": f"{type(exc).__name__}: {exc}"}
    atomic_write_bytes(job["out"], json.dumps(json_safe(out)).encode())
    return 0

