"""What submitting one task costs from Python (the path every op takes), to check that the
StarPU-MPI branch in the generated submit helpers leaves the single-process path as fast:

    nntile-lab bench submit-cost [--tasks 20000] [--repeats 7]

Submits ``fill`` on 1-element tiles (the kernel is next to nothing) with one eager worker and
prints the median and minimum µs per task over the repeats."""
from __future__ import annotations

import statistics
import time


def measure(tasks: int = 20000, repeats: int = 7) -> dict:
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab import tensor
    from nntile_lab._lib import lib
    from nntile_lab.runtime import Runtime
    if tasks < 1 or repeats < 1:
        raise ValueError(f"tasks={tasks}, repeats={repeats}: both must be >= 1")
    per = []
    with Runtime(scheduler="eager", ncpu=1) as rt:
        x = tensor.empty((tasks,), (1,))
        h = x.handles
        for _ in range(repeats):
            rt.wait()
            t0 = time.perf_counter()
            for i in range(tasks):
                lib.nl_submit_fill(h[i], 1, 1.0)
            per.append((time.perf_counter() - t0) / tasks * 1e6)
            rt.wait()
        x.free()
    return {"tasks": tasks, "repeats": repeats, "median_us": statistics.median(per),
            "min_us": min(per), "mpi_built": bool(lib.nl_mpi_available())}
