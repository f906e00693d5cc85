"""GPT-2 training steps, on one process or under mpirun with StarPU-MPI.

    python mpi_train.py OUT.json DISTRIBUTION [--steps N] [--save DIR] [--resume DIR]
                        [--die-at-step K --die-rank R]

DISTRIBUTION: tile-cyclic (operator-parallel: every tensor's tiles spread over the ranks),
weights-2d (block-cyclic over a rank grid along the first two tile axes), on-rank-1, or
data-parallel (weights tile-cyclic; every activation's batch tiles block-cyclic over the ranks,
so each rank runs the forward and backward of its part of the batch, and the weight-gradient
tasks sum the parts on the gradient tiles' owners).
Rank 0 writes {"losses": [...], "ranks": P} to OUT.json. With --die-at-step, rank R exits
with status 7 before step K (the others must not hang)."""
import argparse
import json
import os
import sys
import time

import numpy as np

from nntile_lab import experiment
from nntile_lab.spec import ExperimentSpec

SPEC = ExperimentSpec(n_layer=2, n_head=2, n_embd=32, vocab_size=96, seq_len=16, batch=4,
                      batch_tile=1, embd_tile=16, inner_tile=64, head_tile=1, vocab_tile=48,
                      ncpu=1, scheduler="eager", steps=5, lr=1e-2, warmup=1, seed=3)


def distribution(name, size):
    from nntile_lab.parallel.mpi import BlockCyclic, OnRank, TileCyclic
    if name in ("tile-cyclic", "data-parallel"):
        return TileCyclic()
    if name == "weights-2d":
        return BlockCyclic(axes=(0, 1), grid=(2, size // 2) if size % 2 == 0 else (size, 1))
    if name == "on-rank-1":
        return OnRank(1 % size)
    raise SystemExit(f"unknown distribution {name!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("distribution")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--save", default=None)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--die-at-step", type=int, default=None)
    ap.add_argument("--die-rank", type=int, default=1)
    ap.add_argument("--raise-at-step", type=int, default=None,
                    help="rank --die-rank raises an exception there instead of exiting")
    args = ap.parse_args(argv)
    from nntile_lab.train.checkpoint import load_checkpoint, save_checkpoint
    with experiment.runtime(SPEC) as rt:
        rank = rt.mpi.rank if rt.mpi else 0
        size = rt.mpi.size if rt.mpi else 1
        ctx = rt.mpi.distribute(distribution(args.distribution, size)) if rt.mpi else None
        if ctx:
            ctx.__enter__()
        model, opt, schedule = experiment.build(SPEC)
        owned = np.bincount([o for p in model.params.values() for o in (p.owners or [0])],
                            minlength=size).tolist()
        first = 0
        if args.resume:   # every rank reads the files and writes the tiles it owns
            ck = load_checkpoint(args.resume)
            model.load_state_dict(ck.model_state)
            opt.load_state_dict(ck.optimizer_state)
            first = ck.state["step"]
        rng = np.random.default_rng(SPEC.seed + first)
        losses = []
        for k in range(first, first + args.steps):
            if rank == args.die_rank and k in (args.die_at_step, args.raise_at_step):
                with open(args.out + ".died", "w") as f:   # when: the others end from here
                    f.write(repr(time.time()))
            if args.die_at_step == k and rank == args.die_rank:
                os._exit(7)
            if args.raise_at_step == k and rank == args.die_rank:
                raise RuntimeError(f"rank {rank} fails on purpose at step {k}")
            # a learnable stream (next token = token + 1), so the losses fall
            start = rng.integers(0, SPEC.vocab_size, (SPEC.batch, 1))
            seq = (start + np.arange(SPEC.seq_len + 1)) % SPEC.vocab_size
            ids, labels = seq[:, :-1], seq[:, 1:]
            if args.distribution == "data-parallel" and rt.mpi:
                from nntile_lab.parallel.mpi import BlockCyclic
                with rt.mpi.distribute(BlockCyclic(axes=(0,))):   # batch-major activations
                    losses.append(model.forward_backward(ids, labels))
            else:
                losses.append(model.forward_backward(ids, labels))
            opt.step(schedule(k), SPEC.clip)
            rt.wait()
        if args.save:     # every rank gathers (collective), rank 0 writes
            model_state, opt_state = model.state_dict(), opt.state_dict()
            if rank == 0:
                save_checkpoint(args.save, model_state, opt_state,
                                {"step": first + args.steps})
        if ctx:
            ctx.__exit__(None, None, None)
    if rank == 0:
        with open(args.out + ".tmp", "w") as f:
            json.dump({"losses": losses, "ranks": size, "param_tiles_per_rank": owned}, f)
        os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
