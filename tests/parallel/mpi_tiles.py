"""Run under mpirun: distributed tiles, tiled gemm and add over StarPU-MPI, checked on every
rank against numpy (each rank computes the same random inputs from one seed)."""
import sys
from pathlib import Path

import numpy as np

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab import tensor as T
from nntile_lab.parallel.mpi import BlockCyclic, OnRank, Replicated, TileCyclic


def main() -> int:
    rng = np.random.default_rng(0)
    with nl.Runtime(scheduler="eager", ncpu=1) as rt:
        mpi = rt.mpi
        assert mpi is not None and mpi.size > 1, "run under mpirun -n 2 or more"
        p = mpi.size
        grid2 = (2, p // 2) if p % 2 == 0 else (p, 1)
        dists = [OnRank(p - 1), TileCyclic(), BlockCyclic(axes=(0,)),
                 BlockCyclic(axes=(0, 1), grid=grid2), BlockCyclic(axes=(1,), block=2)]
        for d in dists:
            a_np = rng.standard_normal((48, 40)).astype(np.float32)
            b_np = rng.standard_normal((40, 56)).astype(np.float32)
            c_np = rng.standard_normal((48, 56)).astype(np.float32)
            with mpi.distribute(d):
                a = T.from_numpy(a_np, (16, 8))
                b = T.from_numpy(b_np, (8, 16))
                c = T.from_numpy(c_np, (16, 16))
                owners = d.owners(a.grid_shape, p, mpi.rank)
                assert a.owners == owners
                ops.gemm(a, b, alpha=0.5, beta=2.0, out=c)       # tiles move between ranks
                ops.add(c, c, alpha=1.0, beta=1.0)               # c = 2c
                got = c.to_numpy()
            want = 2 * (0.5 * a_np.astype(np.float64) @ b_np + 2.0 * c_np)
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err < 1e-5, (d, err)
            # a second read after the flush sees the same values (the copies came back)
            assert np.array_equal(c.to_numpy(), got)
            for t in (a, b, c):
                t.free()
        # replicated: each rank owns its copy; tasks on replicated tiles run everywhere
        with mpi.distribute(Replicated()):
            x = T.from_numpy(np.full((8,), float(mpi.rank), np.float32), (4,))
            ops.add(x, x, alpha=1.0, beta=1.0)
            assert np.array_equal(x.to_numpy(), np.full(8, 2.0 * mpi.rank, np.float32))
        counts = np.bincount(BlockCyclic(axes=(0,)).owners((4 * p, 3), p, 0), minlength=p)
        assert (counts == 12).all(), counts
        rt.wait()
    # a file, not only a line: mpirun may drop a rank's last output line when the machine is
    # loaded, and a missing line must not read as a rank that failed (nor the reverse)
    if len(sys.argv) > 1:
        (Path(sys.argv[1]) / f"rank_ok.{mpi.rank}").write_text(f"{mpi.rank}/{p}\n")
    print(f"rank ok {mpi.rank}/{p}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
