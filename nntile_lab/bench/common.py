"""Timing and machine facts shared by the benchmarks."""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import time

from threadpoolctl import threadpool_info

from nntile_lab.engine.facts import machine as machine_facts


def median_time(fn, repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds (machines here are shared and noisy)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine() -> dict:
    """The run record's machine facts plus the date and the BLAS core-type override."""
    return machine_facts() | {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                              "python": platform.python_version(),
                              "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                              "blas_kernels": blas_kernels(),
                              # PyTorch's ISA: MKL's and ATen's/inductor's (AVX2 runs)
                              "mkl_enable_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS"),
                              "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY")}


def numpy_blas_threads() -> int | None:
    """Threads numpy's own BLAS uses (a throttled baseline would flatter ratios)."""
    counts = [p["num_threads"] for p in threadpool_info()
              if p.get("user_api") == "blas" and "scipy_openblas32" not in p.get("filepath", "")]
    return max(counts) if counts else None


def blas_kernels() -> dict:
    """The OpenBLAS core type each loaded BLAS runs (numpy's and the kernels'):
    OPENBLAS_CORETYPE changes it, and with it every baseline."""
    return {os.path.basename(p["filepath"]): p.get("architecture") for p in threadpool_info()
            if p.get("user_api") == "blas"}
