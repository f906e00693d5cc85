"""What a record says about the software and the machine that produced its numbers.

A loss or a GFLOP/s figure means little without the library versions and machine behind it:
every record (``engine.record``) carries ``environment()``. Reading these needs no StarPU:
the kernels' build is named without loading it (``cpu_variant``).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
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
from nntile_lab import cpu_variant as variants

# The ISA extensions that change which kernels a BLAS or compiler picks.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")
PACKAGE = Path(nntile_lab.__file__).resolve().parent
# Views only: editing them cannot change a measured number (code_version leaves them out).
VIEW_DIRS = ("widgets", "plots")


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


def machine_id(m: dict | None = None) -> dict:
    """The part of ``machine()`` that changes a measured number (a cache's key): the CPU,
    its ISA and core count — not the kernel's version string."""
    m = machine() if m is None else m
    return {k: m.get(k) for k in ("cpu", "isa", "cores")}


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


def cpu_variant() -> str | None:
    """The build of the kernels this process runs (``nntile_lab.cpu_variant``): the loaded
    one, else the one loading would pick — found without loading the extension."""
    loaded = getattr(sys.modules.get("nntile_lab._lib"), "VARIANT", None)
    if loaded is not None:
        return loaded
    names = [variants.CUSTOM, variants.GENERIC, *variants.X86_64]
    try:
        built = [n for n in names if importlib.util.find_spec(f"nntile_lab._ext.{n}")]
        return variants.choose(built, variants.cpu_flags(),
                               os.environ.get(variants.ENV) or None)
    except ImportError:
        return None


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
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True, cwd=PACKAGE).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True,
                               cwd=PACKAGE).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("-dirty" if dirty else "")) or None


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """16 hex digits of sha256 over the package's Python sources (views left out), the
    compiled extension and, in a source checkout, ``kernels/`` (C sources and the codelet
    table): a cached point measured by other code is measured again."""
    h = hashlib.sha256()
    files = [p for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).parts[0] not in VIEW_DIRS]
    files += list(PACKAGE.glob("_ext/*.so"))   # every CPU variant
    kernels = PACKAGE.parent / "kernels"
    if kernels.is_dir():
        files += [p for p in kernels.rglob("*") if p.suffix in (".c", ".h", ".py")]
    variant = cpu_variant()
    if variant is not None:
        h.update(b"loaded:" + variant.encode())   # NNTILE_LAB_CPU_VARIANT
    for p in sorted(set(files)):
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


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
    """``{"git_commit", "versions", "machine", "cpu_variant"}`` of this process (no host
    name)."""
    return {"git_commit": git_commit(), "versions": versions(), "machine": machine(),
            "cpu_variant": cpu_variant()}


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


def digest(obj, n: int = 16) -> str:
    """``n`` hex digits of sha256 over ``obj`` as canonical JSON (sorted keys)."""
    text = json.dumps(json_safe(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]
