"""Measurements for the engine's tests, named "tests.engine.helpers:<function>" in a Point
(the point's process imports them from the repository root)."""
from __future__ import annotations

import os
import time

import numpy as np


def echo(spec, ctx) -> dict:
    """A point that fits: its options back, this process's pid."""
    return {"gflops": 1.5, "pid": os.getpid(), "n_layer": None if spec is None else spec.n_layer,
            **{f"option_{k}": v for k, v in ctx.options.items()}}


def sleep(spec, ctx) -> dict:
    time.sleep(ctx.options.get("seconds", 60))
    return {"slept": ctx.options.get("seconds", 60)}


def fail(spec, ctx) -> dict:
    ctx.partial["started"] = 1
    raise ValueError("bad tile")


def out_of_memory(spec, ctx) -> dict:
    raise MemoryError("the step needs 9 GiB")


def crash(spec, ctx) -> dict:
    os.abort()


def allocate(spec, ctx) -> dict:
    """Touch ``mib`` MiB and hold them a second (the cap's watchdog samples every 20 ms)."""
    a = np.ones(ctx.options["mib"] * 2**20 // 8)
    time.sleep(1.0)
    return {"touched_mb": a.nbytes / 2**20}


def imported(spec, ctx) -> dict:
    """Whether the point's process has loaded tests.engine.registers (``Point.imports``)."""
    import sys
    return {"loaded": int("tests.engine.registers" in sys.modules)}


def gemm_then_stop(spec, ctx) -> dict:
    """A StarPU run that knows its result before its runtime stops (ctx.finished), as a
    figure point does; NNTILE_LAB_POINT_FAULT=abort-at-shutdown then aborts in the stop."""
    import nntile_lab as nl
    with nl.Runtime(ncpu=1):
        a = nl.full((64, 64), 1.0, (32, 32))
        value = float(nl.ops.gemm(a, a).to_numpy()[0, 0])
        ctx.finished({"value": value})
    return {"value": value, "after_stop": True}
