"""The bf16 GEMM peak beside the fp32 one, through the kernels a bf16 run would use:
``nntile-lab peak --precision bf16``.

What it measures: one tiled N×N×N product (N = 2048, 512² tiles: 64 tasks of 0.27 GFLOP)
on every core StarPU may use, once with bfloat16 inputs (``gemm_bf16``: oneDNN, float32
accumulation and output) and once in float32 (``gemm``: OpenBLAS sgemm), best of rounds a
pause apart (:func:`nntile_lab.sgemm_peak.best_of_rounds`: a neighbour's burst slows a
trial, never speeds one up). The ratio says whether bf16 compute pays on this CPU: well
above 1 with AVX-512 BF16, below 1 where oneDNN has no bf16 matmul (AVX2 only: the kernel
then widens to float32 and runs sgemm, plus the widening); BENCHMARKS.md, "bf16 GEMM
library", has the figures per code path. Not cached: it reads the machine as it is now
(seconds), and no other figure divides by it yet.
"""
from __future__ import annotations

import contextlib
import datetime

import numpy as np

from nntile_lab import ops
from nntile_lab.engine.facts import machine
from nntile_lab.runtime import Runtime
from nntile_lab.sgemm_peak import best_of_rounds
from nntile_lab.tensor import from_numpy

N, TILE = 2048, 512
TRIALS, ROUNDS, PAUSE_S = 2, 3, 0.25


# bytes per n² of the measurement's tensors: a, b, c in float32 and a, b in bf16
BYTES_PER_N2 = 3 * 4 + 2 * 2


def fitting_size(n: int, limit_mb: int | None) -> int:
    """``n``, or under a RAM limit the largest power of two (at least 128) whose tensors
    take at most a quarter of it: the product must run in RAM, not through a disk node
    (``--precision auto`` under a 16–40 MiB cap measured the disk, or ran out of memory)."""
    if limit_mb is None:
        return n
    fit = 128
    while fit * 2 <= n and BYTES_PER_N2 * (fit * 2) ** 2 <= limit_mb * (1 << 20) // 4:
        fit *= 2
    return min(n, fit)


def measure(n: int = N, tile: int = TILE, trials: int = TRIALS, rounds: int = ROUNDS,
            pause_s: float = PAUSE_S) -> dict:
    """GFLOP/s of the tiled bf16 and fp32 products (best and median), their ratio, and
    how they were measured. Uses the running Runtime (a smaller product under its RAM
    limit: ``fitting_size``), or starts one on every core."""
    if n < 1 or not 1 <= tile <= n:
        raise ValueError(f"n={n}, tile={tile}: need 1 <= tile <= n")
    if Runtime.active is not None:
        n = fitting_size(n, Runtime.active.memory_limit_mb)
        tile = min(tile, n)
    own = Runtime.active is None
    with (Runtime() if own else contextlib.nullcontext(Runtime.active)) as rt:
        rng = np.random.default_rng(0)
        a = from_numpy(rng.standard_normal((n, n), dtype=np.float32), (tile, tile))
        b = from_numpy(rng.standard_normal((n, n), dtype=np.float32), (tile, tile))
        a16, b16 = ops.to_bf16(a), ops.to_bf16(b)
        c = ops.gemm(a, b)
        rates = {}
        for name, (x, y) in (("bf16", (a16, b16)), ("fp32", (a, b))):
            def trial(x=x, y=y):
                ops.gemm(x, y, out=c)
                rt.wait()
            trial()   # warm-up: oneDNN's primitive, page faults
            best, times = best_of_rounds(trial, trials, rounds, pause_s)
            rates[name] = (2.0 * n**3 / best / 1e9, 2.0 * n**3 / float(np.median(times)) / 1e9)
        workers = rt.nworkers
    return {"bf16_gflops": rates["bf16"][0], "fp32_gflops": rates["fp32"][0],
            "bf16_median_gflops": rates["bf16"][1], "fp32_median_gflops": rates["fp32"][1],
            "ratio": rates["bf16"][0] / rates["fp32"][0], "workers": workers,
            "cpu_model": machine()["cpu_model"],
            "method": f"tiled {n}³ product, {tile}² tiles, {workers} StarPU workers (one "
                      f"thread per task), best of {rounds} rounds x {trials} trials "
                      f"{pause_s} s apart; bf16: gemm_bf16 (oneDNN), fp32: gemm (OpenBLAS)",
            "measured": datetime.datetime.now().isoformat(timespec="seconds")}


def report(entry: dict) -> str:
    return (f"bf16 GEMM peak {entry['bf16_gflops']:.1f} GFLOP/s, fp32 {entry['fp32_gflops']:.1f}"
            f" (bf16/fp32 {entry['ratio']:.2f}) on {entry['cpu_model']} ({entry['method']}; "
            f"medians {entry['bf16_median_gflops']:.1f} and {entry['fp32_median_gflops']:.1f}; "
            f"measured {entry['measured']})")
