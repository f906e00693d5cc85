"""Child process for the SIGINT tests: computes in a loop until interrupted, then
checks that the runtime stops and a new one computes correctly. Prints READY once
computing, then RECOVERED (exit 0) or a traceback (exit 1)."""
import sys

import numpy as np

import nntile_lab as nl


def work(rt, rng):
    a = rng.standard_normal((96, 96)).astype(np.float32)
    b = rng.standard_normal((96, 96)).astype(np.float32)
    ta, tb = nl.from_numpy(a, (32, 32)), nl.from_numpy(b, (32, 32))
    c = nl.ops.gemm(ta, tb)
    got = c.to_numpy()
    assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-3), "wrong product"
    for _ in range(20):
        c = nl.ops.gemm(c, tb)
        nl.ops.scale(c, 1e-2, out=c)
    rt.wait()


def main():
    restarts = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    rng = np.random.default_rng(0)
    for _ in range(restarts):   # SIGINT used to hang any runtime after the first
        with nl.Runtime(ncpu=2) as rt:
            work(rt, rng)
    rt = nl.Runtime(ncpu=2)
    print("READY", flush=True)
    try:
        while True:
            work(rt, rng)
    except KeyboardInterrupt:
        pass
    rt.stop()
    assert nl.Runtime._active is None
    with nl.Runtime(ncpu=2) as rt2:
        work(rt2, rng)
        a = rng.standard_normal((64, 48)).astype(np.float32)
        assert np.array_equal(nl.from_numpy(a, (16, 16)).to_numpy(), a)
    print("RECOVERED", flush=True)


if __name__ == "__main__":
    main()
