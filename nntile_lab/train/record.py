"""``run.json``: what was run, on what, with which software, and what came out.

A loss or a GFLOP/s figure means little without the configuration, library versions and
machine that produced it; the record keeps them together so runs can be compared later.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from nntile_lab.train.checkpoint import atomic_write_text


def starpu_version() -> str | None:
    """StarPU's version per ``pkg-config`` (what the extension was built against), or None."""
    try:
        out = subprocess.run(["pkg-config", "--modversion", "starpu-1.3"], capture_output=True,
                             text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def versions() -> dict:
    import nntile_lab
    return {"python": platform.python_version(), "numpy": np.__version__,
            "nntile_lab": nntile_lab.__version__, "starpu": starpu_version(),
            "git_commit": _git_commit()}


def _git_commit() -> str | None:
    """The source checkout's commit, when running from one (None for an installed wheel)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine() -> dict:
    """CPU model, core count and RAM of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem = None
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": None if mem is None
            else round(mem, 1), "platform": platform.platform()}


def _json_safe(obj):
    """NaN/inf become null so ``run.json`` is standard JSON any tool can read."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (np.generic, Path)):
        return obj.item() if isinstance(obj, np.generic) else str(obj)
    return obj


def write_run_record(out_dir: str | os.PathLike, config: dict, results: dict) -> Path:
    """Atomically write ``OUT/run.json`` with config, versions, machine, date and results."""
    record = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "config": config, "versions": versions(), "machine": machine(),
              "results": results}
    return atomic_write_text(Path(out_dir) / "run.json",
                             json.dumps(_json_safe(record), indent=2, default=str) + "\n")
