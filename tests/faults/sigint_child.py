"""Child process for the SIGINT tests (tests/faults/test_interrupts.py).

``loop [RESTARTS]``: after RESTARTS whole runtimes (SIGINT used to hang every runtime
after the first), compute in a loop (tile copies, gemms, waits) until interrupted.
``wait``: submit a long queue of tasks and block in rt.wait().
Either way it prints READY, then INTERRUPTED <s> <tasks left> when KeyboardInterrupt
arrives, stops the runtime, checks a new one computes correctly and prints RECOVERED."""
import sys
import time

import numpy as np

import nntile_lab as nl
from nntile_lab._lib import lib


def work(rt, rng):
    a = rng.standard_normal((96, 96)).astype(np.float32)
    b = rng.standard_normal((96, 96)).astype(np.float32)
    ta, tb = nl.from_numpy(a, (32, 32)), nl.from_numpy(b, (32, 32))
    got = nl.ops.gemm(ta, tb).to_numpy()
    assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-3), "wrong product"
    c = nl.ops.gemm(ta, tb)
    for _ in range(20):
        c = nl.ops.gemm(c, tb)
        nl.ops.scale(c, 1e-2, out=c)
    rt.wait()


def long_queue():
    x = nl.from_numpy(np.ones((512, 512), np.float32), (256, 256))
    c = nl.ops.gemm(x, x)
    for _ in range(1000):   # ~1.5 s of tasks on 2 cores
        c = nl.ops.gemm(c, x, alpha=1 / 512)
    return c


def main():
    mode = sys.argv[1]
    rng = np.random.default_rng(0)
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0):
        with nl.Runtime(ncpu=2) as rt:
            work(rt, rng)
    rt = nl.Runtime(ncpu=2)
    try:
        if mode == "wait":
            long_queue()
            print("READY", flush=True)
            rt.wait()
            raise SystemExit("the queue ran out before the interrupt")
        print("READY", flush=True)
        while True:
            work(rt, rng)
    except KeyboardInterrupt:
        print(f"INTERRUPTED {time.monotonic():.3f} {lib.starpu_task_nsubmitted()}", flush=True)
    rt.stop()
    assert nl.Runtime.active is None
    with nl.Runtime(ncpu=2) as rt2:
        work(rt2, rng)
        a = rng.standard_normal((64, 48)).astype(np.float32)
        assert np.array_equal(nl.from_numpy(a, (16, 16)).to_numpy(), a)
    print("RECOVERED", flush=True)


if __name__ == "__main__":
    main()
