"""The machine's sgemm peak, the denominator of MFU on a CPU.

``peak_gflops()`` returns the cached figure for this CPU model and core count,
measuring it the first time: numpy's float32 matmul (N=2048) on every core, the
best of a few runs. numpy's BLAS is raised to all cores for the measurement (an
``OPENBLAS_NUM_THREADS=1`` environment would otherwise give a throttled peak that
flatters every MFU); the kernels' own BLAS is left at one thread.

Cache: ``~/.cache/nntile_lab/peak.json`` (``$NNTILE_LAB_CACHE`` overrides the
directory), one entry per ``"<cpu model>|<cores>|<OPENBLAS_CORETYPE or native>"`` (the
BLAS code path changes the peak about twofold on AVX-512 CPUs). ``nntile-lab peak`` prints it;
``--refresh`` measures again. A run faster than the cached peak (measured while the cores
were busy) makes ``peak_gflops(at_least=rate)`` measure again and keep the higher figure.
"""
from __future__ import annotations

import contextlib
import json
import os
import time

import numpy as np

from nntile_lab.bench.common import machine


def cache_path() -> str:
    root = os.environ.get("NNTILE_LAB_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "nntile_lab"))
    return os.path.join(root, "peak.json")


def machine_key() -> str:
    m = machine()
    return f"{m['cpu_model']}|{m['cores']}|{os.environ.get('OPENBLAS_CORETYPE') or 'native'}"


def measure(n: int = 2048, repeats: int = 5) -> dict:
    """Best float32 matmul rate of ``repeats`` runs on all cores, in GFLOP/s."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with _numpy_blas_on_all_cores() as threads:
        a @ b  # warm-up: thread pool start, page faults
        best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return {"gflops": 2.0 * n**3 / best / 1e9, "method": f"numpy float32 matmul N={n}, best of "
            f"{repeats}", "blas_threads": threads, "measured": machine()["date"]}


def peak_gflops(refresh: bool = False, at_least: float | None = None) -> float:
    """The sgemm peak. ``at_least``: a rate just observed on this machine; a cached peak
    below it cannot be one (it was measured while other work held the cores, and every
    MFU against it would read high, even above 1), so it is measured again and the cache
    keeps the higher figure."""
    entry = peak(refresh)
    if at_least is not None and entry["gflops"] < at_least:
        fresh = measure()
        if fresh["gflops"] > entry["gflops"]:
            entry = _store(fresh)
    return entry["gflops"]


def peak(refresh: bool = False) -> dict:
    """The cached entry for this machine (measured now if missing or ``refresh``)."""
    cache = _load()
    key = machine_key()
    if refresh or key not in cache:
        return _store(measure())
    return {"machine": key, **cache[key]}


def _load() -> dict:
    try:
        with open(cache_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _store(entry: dict) -> dict:
    """Write ``entry`` as this machine's peak (atomically); return it with its key."""
    path, key = cache_path(), machine_key()
    cache = _load()
    cache[key] = entry
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1)
    os.replace(tmp, path)
    return {"machine": key, **entry}


def report(entry: dict) -> str:
    return (f"sgemm peak {entry['gflops']:.1f} GFLOP/s on {entry['machine']} "
            f"({entry['method']}, {entry['blas_threads']} BLAS threads, "
            f"measured {entry['measured']}; cache {cache_path()})")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@contextlib.contextmanager
def _numpy_blas_on_all_cores():
    """numpy's BLAS on every core for the block; the kernels' scipy-openblas32 untouched."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        yield None
        return
    libs = [c for c in ThreadpoolController().lib_controllers
            if c.user_api == "blas" and "scipy_openblas32" not in c.filepath]
    saved = [c.num_threads for c in libs]
    for c in libs:
        c.set_num_threads(os.cpu_count() or 1)
    try:
        yield max((c.num_threads for c in libs), default=None)
    finally:
        for c, n in zip(libs, saved):
            c.set_num_threads(n)
