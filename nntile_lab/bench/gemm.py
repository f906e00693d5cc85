"""Tiled sgemm on StarPU vs numpy's matmul (all cores), same run, same machine."""
from __future__ import annotations

import time
from functools import partial

import numpy as np

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.bench.common import machine, median_time, numpy_blas_threads
from nntile_lab.spec import DEFAULTS


def submit_cost_us(rt: nl.Runtime, ntasks: int = 20_000) -> float:
    """Cost of submitting one task from Python (the op's loop, cffi, StarPU's submit):
    a fill over 1-element tiles, with the workers paused so that they do not
    compete with the submitting thread for the cores."""
    x = nl.empty((ntasks,), (1,))
    nl.ops.fill(x, 0.0)  # warm-up: allocation and perf-model set-up
    rt.wait()
    lib.starpu_pause()
    try:
        t0 = time.perf_counter()
        nl.ops.fill(x, 1.0)
        cost = (time.perf_counter() - t0) / ntasks * 1e6
    finally:
        lib.starpu_resume()
    rt.wait()
    x.free()
    return cost


def _timed_product(rt, ta, tb, submit_times: list) -> None:
    t0 = time.perf_counter()
    c = nl.ops.gemm(ta, tb)
    submit_times.append(time.perf_counter() - t0)
    rt.wait()
    c.free()


def run(n: int = 4096, tiles=(256, 512, 1024), repeats: int = 5,
        scheduler: str = DEFAULTS.scheduler,
        ncpu: int | None = None, target_tile: int = 512) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    flops = 2.0 * n**3
    numpy_s = median_time(lambda: a @ b, repeats)
    rows = []
    with nl.Runtime(scheduler=scheduler, ncpu=ncpu) as rt:
        for tile in tiles:
            ta, tb = nl.from_numpy(a, (tile, tile)), nl.from_numpy(b, (tile, tile))
            submit = []

            seconds = median_time(partial(_timed_product, rt, ta, tb, submit), repeats)
            ntasks = (-(-n // tile)) ** 3
            rows.append({"tile": tile, "seconds": seconds, "nntile_gflops": flops / seconds / 1e9,
                         "tasks": ntasks, "gemm_submit_us_per_task":
                         float(np.median(submit)) / ntasks * 1e6})
            ta.free()
            tb.free()
        submit_us = submit_cost_us(rt)
        workers = rt.nworkers
    numpy_gflops = flops / numpy_s / 1e9
    for r in rows:
        r["ratio"] = r["nntile_gflops"] / numpy_gflops
    main = next((r for r in rows if r["tile"] == target_tile), rows[0])
    return {"bench": "gemm", "n": n, "tile": main["tile"], "scheduler": scheduler,
            "workers": workers, "nntile_gflops": main["nntile_gflops"],
            "numpy_gflops": numpy_gflops, "ratio": main["ratio"],
            "numpy_blas_threads": numpy_blas_threads(), "submit_us_per_task": submit_us,
            "repeats": repeats, "by_tile": rows, "machine": machine()}


def report(res: dict) -> str:
    lines = [f"tiled sgemm N={res['n']}, scheduler {res['scheduler']}, {res['workers']} workers;"
             f" numpy matmul on {res['numpy_blas_threads']} BLAS threads: "
             f"{res['numpy_gflops']:.1f} GFLOP/s (median of {res['repeats']})",
             f"{'tile':>6} {'GFLOP/s':>9} {'ratio':>6} {'tasks':>6} {'submit µs/task':>15}"]
    lines += [f"{r['tile']:>6} {r['nntile_gflops']:>9.1f} {r['ratio']:>6.2f} {r['tasks']:>6} "
              f"{r['gemm_submit_us_per_task']:>15.2f}" for r in res["by_tile"]]
    lines.append(f"Python submission cost (1-element fill tasks): "
                 f"{res['submit_us_per_task']:.2f} µs/task")
    return "\n".join(lines)
