"""The machine's sgemm peak: the one denominator of MFU in every report, sweep, trace and
figure (``bench train``, ``nntile-lab trace``, the sweeps and the widgets all call
:func:`gflops`).

What it measures: numpy's float32 matmul (N=2048) on every core — numpy's BLAS is raised to
all the cores this process may use for the measurement (an ``OPENBLAS_NUM_THREADS=1``
environment would otherwise give a throttled peak that flatters every MFU); the kernels' own
BLAS is left at one thread.

Why best of many short trials in rounds apart: on a shared machine a neighbour's burst
slows some matmuls, never speeds one up, so the fastest trial is the closest to the
machine's rate; trials spread over rounds a pause apart are not all covered by one burst
(a median of five back to back, taken inside a busy run, read far below the machine's rate
and inflated the MFU: BENCHMARKS.md, "One sgemm peak").

Cache: ``~/.cache/nntile_lab/sgemm_peak.json`` (``$NNTILE_LAB_CACHE`` overrides the directory),
one entry per CPU model, BLAS threads and numpy's BLAS (library, version and core type: the
BLAS code path changes the peak about twofold on AVX-512 CPUs). ``nntile-lab peak`` prints
it; ``--refresh`` measures again. A rate observed above the cached peak (which was then
measured while the cores were busy) makes ``gflops(at_least=rate)`` measure again and keep
the higher figure, so the cached peak only ever moves up towards the machine's rate.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import time

import numpy as np
from threadpoolctl import ThreadpoolController

from nntile_lab.engine.facts import machine


def check_peak(peak_gflops) -> float | None:
    """A given peak (the MFU's denominator) as a float, or None (measured); anything but a
    finite rate > 0 is refused naming it (-5 gave a negative MFU)."""
    if peak_gflops is None:
        return None
    try:
        value = float(peak_gflops)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(peak_gflops, bool) or not 0 < value < float("inf"):
        raise ValueError(f"peak_gflops={peak_gflops!r} must be the machine's GFLOP/s, a "
                         "number > 0 (or None: nntile_lab.sgemm_peak measures it)")
    return value


N = 2048          # a matmul of ~17 GFLOP: tens of ms, long enough to reach the BLAS's rate
TRIALS = 4        # matmuls per round
ROUNDS = 3        # rounds, PAUSE_S apart
PAUSE_S = 0.25


def cache_path() -> str:
    root = os.environ.get("NNTILE_LAB_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "nntile_lab"))
    return os.path.join(root, "sgemm_peak.json")


def cores() -> int:
    """The cores this process may run on (a cgroup or taskset may hide some)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _numpy_blas() -> list:
    """numpy's BLAS controllers (not the kernels' scipy-openblas32)."""
    return [c for c in ThreadpoolController().lib_controllers
            if c.user_api == "blas" and "scipy_openblas32" not in c.filepath]


def machine_key() -> str:
    """CPU model | BLAS threads | numpy's BLAS: what the peak depends on."""
    blas = ",".join(sorted(f"{c.internal_api} {c.version} {c.architecture}"
                           for c in _numpy_blas())) or "unknown BLAS"
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    return (f"{machine()['cpu_model']}|{cores()} threads|{blas}"
            + (f" (OPENBLAS_CORETYPE={coretype})" if coretype else ""))


def best_of_rounds(trial, trials: int = TRIALS, rounds: int = ROUNDS,
                   pause_s: float = PAUSE_S) -> tuple[float, list[float]]:
    """(fastest, all) seconds of ``trials`` calls of ``trial()`` in each of ``rounds``
    rounds, ``pause_s`` apart."""
    if trials < 1 or rounds < 1:
        raise ValueError(f"trials={trials}, rounds={rounds}: both must be >= 1")
    times = []
    for r in range(rounds):
        if r:
            time.sleep(pause_s)
        for _ in range(trials):
            t0 = time.perf_counter()
            trial()
            times.append(time.perf_counter() - t0)
    return min(times), times


def measure(n: int = N, trials: int = TRIALS, rounds: int = ROUNDS,
            pause_s: float = PAUSE_S) -> dict:
    """The float32 matmul rate on all cores, best of ``rounds`` × ``trials``, in GFLOP/s."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with _numpy_blas_on_all_cores() as threads:
        a @ b  # warm-up: thread pool start, page faults
        best, times = best_of_rounds(lambda: a @ b, trials, rounds, pause_s)
    flop = 2.0 * n**3
    return {"gflops": flop / best / 1e9,
            "method": f"numpy float32 matmul N={n}, best of {rounds} rounds x {trials} trials "
                      f"{pause_s} s apart",
            "median_gflops": flop / float(np.median(times)) / 1e9, "blas_threads": threads,
            "measured": datetime.datetime.now().isoformat(timespec="seconds")}


def gflops(refresh: bool = False, at_least: float | None = None) -> float:
    """The sgemm peak in GFLOP/s. ``at_least``: a rate just observed on this machine; a
    cached peak below it cannot be one (it was measured while other work held the cores,
    and every MFU against it would read high, even above 1), so it is measured again and
    the cache keeps the higher figure."""
    entry = cached(refresh)
    if at_least is not None and entry["gflops"] < at_least:
        fresh = measure()
        if fresh["gflops"] > entry["gflops"]:
            entry = _store(fresh)
    return entry["gflops"]


def cached(refresh: bool = False) -> dict:
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


@contextlib.contextmanager
def _numpy_blas_on_all_cores():
    """numpy's BLAS on every core for the block; the kernels' scipy-openblas32 untouched."""
    libs = _numpy_blas()
    saved = [c.num_threads for c in libs]
    for c in libs:
        c.set_num_threads(cores())
    try:
        yield max((c.num_threads for c in libs), default=None)
    finally:
        for c, n in zip(libs, saved):
            c.set_num_threads(n)
