"""Records: what was run, on what, with which software, and what came out.

A loss or a GFLOP/s figure means little without the spec, library versions and machine
that produced it; a record keeps them together in one JSON file so a figure can be redrawn
from its records alone, on a machine without StarPU (reading needs only the json module).

    {"format": 1, "kind": "train" | "sweep-point" | ..., "date": ISO time,
     "spec": ExperimentSpec.to_dict(), "git_commit": str | None,
     "versions": {"nntile_lab", "python", "numpy", "starpu", "blas", "torch"},
     "machine": {"cpu_model", "isa", "cores", "memory_gib", "platform"},
     "results": {...}, ...extra top-level keys the writer adds}

NaN and infinities become null (standard JSON). Writes are atomic.
"""
from __future__ import annotations

import datetime
import functools
import json
import math
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

import nntile_lab
from nntile_lab.data.bins import atomic_write_bytes

FORMAT = 1
# The ISA extensions that change which kernels a BLAS or compiler picks.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")


class RecordError(ValueError):
    """A record that cannot be used: unreadable, corrupt, or from another format."""


def cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty off Linux)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    if out:
                        break
                    continue
                key, _, value = line.partition(":")
                out.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return out


def machine() -> dict:
    """CPU model, the ISA flags that matter for kernels, cores, RAM, platform."""
    return dict(_machine())


@functools.lru_cache(maxsize=1)
def _machine() -> dict:
    info = cpuinfo()
    flags = set(info.get("flags", "").split())
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem = None
    model = info.get("model name") or platform.processor() or platform.machine()
    family, number = _int(info.get("cpu family")), _int(info.get("model"))
    return {"cpu_model": model, "cpu_family": family, "cpu_model_number": number,
            "cpu": cpu_name(model, info.get("vendor_id"), family, number),
            "isa": [f for f in ISA_FLAGS if f in flags], "cores": os.cpu_count(),
            "memory_gib": None if mem is None else round(mem, 1),
            "platform": platform.platform()}


def _int(text: str | None) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def cpu_name(model: str, vendor: str | None, family: int | None, number: int | None) -> str:
    """The CPU as a reader needs it: a virtual machine's model name may say only "AMD EPYC",
    so add family and model, and for AMD the core generation they mean (AMD's family/model
    tables: 0x17 Zen/Zen 2, 0x19 Zen 3 or Zen 4 by model, 0x1A Zen 5)."""
    if family is None or number is None:
        return model
    gen = None
    if vendor == "AuthenticAMD":
        zen4 = any(lo <= number <= hi for lo, hi in ((0x10, 0x1F), (0x60, 0x7F), (0xA0, 0xAF)))
        gen = {0x17: "Zen or Zen 2", 0x19: "Zen 4" if zen4 else "Zen 3",
               0x1A: "Zen 5"}.get(family)
    return f"{model}, family {family} model {number}" + (f" ({gen})" if gen else "")


@functools.lru_cache(maxsize=1)
def starpu_version() -> str | None:
    """StarPU's version per ``pkg-config`` (what the extension was built against), or None."""
    try:
        out = subprocess.run(["pkg-config", "--modversion", "starpu-1.3"], capture_output=True,
                             text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The source checkout's commit (+ "-dirty" with local changes), None for a wheel."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True, cwd=here).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True,
                               cwd=here).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("-dirty" if dirty else "")) or None


def blas() -> dict:
    """Each loaded BLAS (numpy's and the kernels'): file → version and core type."""
    return {os.path.basename(p["filepath"]): {"version": p.get("version"),
                                              "architecture": p.get("architecture"),
                                              "threads": p.get("num_threads")}
            for p in threadpool_info() if p.get("user_api") == "blas"}


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    """Versions of everything that changes a number (torch read without importing it)."""
    return {"nntile_lab": nntile_lab.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "starpu": starpu_version(), "blas": blas(),
            "torch": _dist_version("torch"),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
            # which build of the kernels ran (nntile_lab.cpu_variant), if they were loaded
            "kernels": getattr(sys.modules.get("nntile_lab._lib"), "VARIANT", None)}


def environment() -> dict:
    """``{"git_commit", "versions", "machine"}`` of this process (no host name)."""
    return {"git_commit": git_commit(), "versions": versions(), "machine": machine()}


def json_safe(obj):
    """NaN/inf → null, numpy scalars → Python, paths → str: standard JSON any tool reads."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def make_record(spec, results: dict, kind: str, env: dict | None = None, **extra) -> dict:
    """The record as a dict (``spec``: an ExperimentSpec, a dict, or None)."""
    spec_dict = spec.to_dict() if hasattr(spec, "to_dict") else spec
    return json_safe({"format": FORMAT, "kind": kind,
                      "date": datetime.datetime.now().astimezone().isoformat(
                          timespec="seconds"),
                      "spec": spec_dict, **extra, **(env or environment()),
                      "results": results})


def write_record(path, spec, results: dict, kind: str, **extra) -> Path:
    """Atomically write the record of one run to ``path`` (a JSON file)."""
    text = json.dumps(make_record(spec, results, kind, **extra), indent=2, default=str) + "\n"
    return atomic_write_bytes(Path(path), text.encode())


def read_record(path) -> dict:
    """A record from disk; RecordError (naming the file and the fix) when it is unreadable,
    not JSON, or written by another format version."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise RecordError(f"cannot read record {path}: {exc.strerror}") from None
    try:
        rec = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"record {path} is corrupt (not JSON: {exc}); delete it and run "
                          "again") from None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        got = rec.get("format") if isinstance(rec, dict) else None
        raise RecordError(f"record {path} has format {got!r}, this nntile_lab writes format "
                          f"{FORMAT}: it comes from an older version; run again to replace it")
    return rec


def write_run_record(out_dir, config: dict, results: dict, spec=None) -> Path:
    """``OUT/run.json`` of a training run (``config``: what else describes the run)."""
    return write_record(Path(out_dir) / "run.json", spec, results, kind="train", config=config)
