"""Which build of the C kernels this CPU runs: one wheel for every x86-64 machine.

The extension is compiled once per x86-64 micro-architecture level (``kernels/build.py``):
``v4`` (AVX-512 F/BW/CD/DQ/VL) and ``v3`` (AVX2, FMA, BMI, F16C). At import the loader picks
the highest level whose instructions this CPU has, so a wheel built on an AVX-512 machine also
runs on an AVX2-only one instead of dying with an illegal instruction. Pure Python, no
extension: the build, the loader and the benchmarks share this table.

``NNTILE_LAB_CPU_VARIANT=v3`` (or another built name) overrides the choice, for example to
compare the two builds with ``nntile-lab bench kernels``; a variant this CPU cannot run is
refused with an error instead of a crash.
"""
from __future__ import annotations

import os
import platform

ENV = "NNTILE_LAB_CPU_VARIANT"

# name -> (gcc flags, the /proc/cpuinfo flags the level needs), best first
X86_64 = {
    "v4": ("-march=x86-64-v4",
           ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    "v3": ("-march=x86-64-v3",
           ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
}
# NNTILE_LAB_CFLAGS at build time replaces the table by one variant built with those flags
CUSTOM = "custom"
# not x86-64: one build with the compiler's defaults for the target
GENERIC = "generic"


def build_variants(environ=os.environ, machine: str | None = None) -> dict[str, str]:
    """name -> gcc architecture flags of every variant to compile."""
    custom = environ.get("NNTILE_LAB_CFLAGS")
    if custom is not None:
        return {CUSTOM: custom}
    if (machine or platform.machine()).lower() not in ("x86_64", "amd64"):
        return {GENERIC: ""}
    return {name: flags for name, (flags, _) in X86_64.items()}


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's feature flags (Linux), or None where they cannot be read."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return set()


def runs_on(name: str, flags: set[str] | None) -> bool:
    """Whether variant ``name`` can run on a CPU with ``flags`` (unknown flags: only
    variants without requirements)."""
    if name not in X86_64:
        return True   # custom / generic: built for this machine by whoever built it
    return flags is not None and set(X86_64[name][1]) <= flags


def choose(built: list[str], flags: set[str] | None, override: str | None = None) -> str:
    """The variant to load among ``built``: ``override`` if given (checked), else the best
    one the CPU runs. Raises ImportError with the fix when none fits."""
    if override:
        if override not in built:
            raise ImportError(f"{ENV}={override!r}: this install has no such build of the "
                              f"kernels; built: {', '.join(sorted(built)) or 'none'}")
        if not runs_on(override, flags):
            need = " ".join(sorted(set(X86_64[override][1]) - (flags or set())))
            raise ImportError(f"{ENV}={override!r}: this CPU lacks {need}; the build would stop "
                              f"with an illegal instruction. Unset {ENV} or pick one of: "
                              + ", ".join(n for n in built if runs_on(n, flags)))
        return override
    order = [n for n in (CUSTOM, GENERIC, *X86_64) if n in built]
    for name in order:
        if runs_on(name, flags):
            return name
    raise ImportError(
        "this CPU runs none of the kernels' builds (" + ", ".join(order) + "; x86-64-v3 needs "
        "AVX2 and FMA). Build from source for this machine:\n"
        "  NNTILE_LAB_CFLAGS=-march=native pip install --no-binary nntile_lab nntile_lab")
