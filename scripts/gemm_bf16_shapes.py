"""The bf16 GEMM codelet alone, at one thread, on the task shapes of a bf16 training step:
every (batch, m, n, k, trans_a, trans_b, beta) that the step submits, with its count per
step, timed by direct calls (kernels/bench.c's nl_time_op_cpu, as `bench kernels`) in
rounds that interleave the shapes. Both clocks: the thread's CPU time (the kernel's rate
on a shared machine) and the wall time (which also counts the time other processes had
the core — more of it the longer a call runs, since a 40 ms call is preempted and a 0.5 ms
one seldom: wall-time rates of short and long products are not comparable there).

    .venv/bin/python scripts/gemm_bf16_shapes.py [--n-embd 1024] [--rounds 5] [--json]

The shapes are those of `point_spec(4, E)` (figures' family: heads of 64 in tiles of
n_head/2, T 256, B 4 in one batch tile, inner tile 1024, vocabulary tile 8192): the
products of nn/gpt2.py's forward and backward. BENCHMARKS.md, "bf16 GEMM at large
tiles", has a table made with it."""
from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter

import ml_dtypes
import numpy as np

from nntile_lab._lib import ffi, lib
from nntile_lab.bench.kernels import table


def step_shapes(n_embd: int, vocab: int = 50257, seq: int = 256, batch: int = 4,
                inner_tile: int = 1024, vocab_tile: int = 8192) -> Counter:
    """(batch, m, n, k, trans_a, trans_b, beta≠0) → products per layer or per step (the
    head's); one batch tile of batch·seq tokens, heads of 64 in two tiles."""
    t, e, hs = batch * seq, n_embd, 64
    heads = n_embd // hs // 2                       # a head tile: half the heads
    ht = heads * hs                                 # its width in the embedding
    inner = 4 * n_embd
    nin = inner // inner_tile
    shapes: Counter = Counter()
    # attention's q, k, v projections (per head tile: an output tile of ht columns),
    # the output projection (contracting over head tiles), the MLP in and out
    shapes[(1, t, ht, e, 0, 0, 0)] += 3 * 2
    shapes[(1, t, e, ht, 0, 0, 0)] += 1
    shapes[(1, t, e, ht, 0, 0, 1)] += 1
    shapes[(1, t, inner_tile, e, 0, 0, 0)] += nin
    shapes[(1, t, e, inner_tile, 0, 0, 0)] += 1
    shapes[(1, t, e, inner_tile, 0, 0, 1)] += nin - 1
    # scores q·kᵀ, att·v (batched over batch × heads of a tile)
    shapes[(batch * heads, seq, seq, hs, 0, 1, 0)] += 2
    shapes[(batch * heads, seq, hs, seq, 0, 0, 0)] += 2
    # backward: dx = dy·Wᵀ (accumulating), dW += xᵀ·dy
    shapes[(1, t, e, ht, 0, 1, 0)] += 1          # q, k, v's dx summed in one: the first
    shapes[(1, t, e, ht, 0, 1, 1)] += 3 * 2 - 1  # of its 6 products sets it
    shapes[(1, e, ht, t, 1, 0, 1)] += 3 * 2
    shapes[(1, t, ht, e, 0, 1, 0)] += 2
    shapes[(1, ht, e, t, 1, 0, 1)] += 2
    shapes[(1, t, e, inner_tile, 0, 1, 0)] += 1
    shapes[(1, t, e, inner_tile, 0, 1, 1)] += nin - 1
    shapes[(1, e, inner_tile, t, 1, 0, 1)] += nin
    shapes[(1, t, inner_tile, e, 0, 1, 0)] += nin
    shapes[(1, inner_tile, e, t, 1, 0, 1)] += nin
    shapes[(batch * heads, seq, seq, hs, 0, 1, 0)] += 2          # datt = dheads·vᵀ
    shapes[(batch * heads, seq, hs, seq, 1, 0, 0)] += 2          # dv = attᵀ·dheads
    shapes[(batch * heads, seq, hs, seq, 0, 0, 0)] += 2          # dq = dscores·k
    shapes[(batch * heads, seq, hs, seq, 1, 0, 0)] += 2          # dk = dscoresᵀ·q
    # the head, per step: logits = x·wteᵀ, dx = dlogits·wte, dwte += dlogitsᵀ·x
    full, last = divmod(vocab, vocab_tile)
    head = [(vocab_tile, full)] + ([(last, 1)] if last else [])
    per_layer = Counter({s: 4 * c for s, c in shapes.items()})   # L = 4 layers
    for v, c in head:
        per_layer[(1, t, v, e, 0, 1, 0)] += c
        per_layer[(1, v, e, t, 1, 0, 1)] += c
    per_layer[(1, t, e, vocab_tile, 0, 0, 0)] += 1
    per_layer[(1, t, e, vocab_tile, 0, 0, 1)] += full - 1
    if last:
        per_layer[(1, t, e, last, 0, 0, 1)] += 1
    return Counter({s: c for s, c in per_layer.items() if c})


def time_shape(shape: tuple, op: int, calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call of the gemm_bf16 codelet at ``shape``."""
    b, m, n, k, ta, tb, beta = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal(b * m * k, dtype=np.float32).astype(ml_dtypes.bfloat16)
    bb = rng.standard_normal(b * k * n, dtype=np.float32).astype(ml_dtypes.bfloat16)
    c = np.zeros(b * m * n, np.float32)
    ptrs = ffi.new("void *[]", [ffi.cast("void *", x.ctypes.data) for x in (a, bb, c)])
    args = ffi.new("double[]", [b, m, n, k, ta, tb, 1.0, float(beta)])
    cpu = ffi.new("double *")
    lib.nl_time_op_cpu(op, ptrs, args, 1, cpu)                   # warm: primitive, caches
    wall = lib.nl_time_op_cpu(op, ptrs, args, calls, cpu)
    if wall < 0:
        raise RuntimeError("gemm_bf16 is not in the compiled codelet table")
    return wall / calls, cpu[0] / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-embd", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    op = {r["name"]: r for r in table()}["gemm_bf16"]["op"]
    shapes = step_shapes(opts.n_embd)
    times: dict = {s: [] for s in shapes}
    for _ in range(opts.rounds):                 # interleaved: each round times every shape
        for s in shapes:
            flops = 2.0 * s[0] * s[1] * s[2] * s[3]
            times[s].append(time_shape(s, op, max(1, int(0.1e9 * 4 / flops))))
    rows = []
    for s, count in sorted(shapes.items(), key=lambda kv: -kv[1] * kv[0][0] * kv[0][1]
                           * kv[0][2] * kv[0][3]):
        flops = 2.0 * s[0] * s[1] * s[2] * s[3]
        cpu = [flops / c / 1e9 for _, c in times[s]]
        wall = [flops / w / 1e9 for w, _ in times[s]]
        rows.append({"batch": s[0], "m": s[1], "n": s[2], "k": s[3], "trans_a": s[4],
                     "trans_b": s[5], "beta": s[6], "per_step": count,
                     "gflop_per_step": count * flops / 1e9,
                     "gflops_cpu": statistics.median(cpu), "gflops_cpu_min": min(cpu),
                     "gflops_cpu_max": max(cpu), "gflops_wall": statistics.median(wall)})
    if opts.json:
        print(json.dumps({"n_embd": opts.n_embd, "rounds": opts.rounds, "shapes": rows}))
        return
    total = sum(r["gflop_per_step"] for r in rows)
    cpu_s = sum(r["gflop_per_step"] / r["gflops_cpu"] for r in rows)
    print(f"gemm_bf16 at one thread, point_spec(4, {opts.n_embd})'s task shapes, median of "
          f"{opts.rounds} interleaved rounds; {total:.0f} GFLOP per step")
    print(f"{'batch×m×n×k':>22} {'trans':>5} {'beta':>4} {'/step':>5} {'GFLOP':>7} "
          f"{'CPU GFLOP/s (min–max)':>22} {'wall':>6}")
    for r in rows:
        tr = "TN"[r["trans_a"] == 0] + "TN"[r["trans_b"] == 0]
        print(f"{r['batch']}×{r['m']}×{r['n']}×{r['k']:<6}".rjust(23)
              + f"{tr:>5} {r['beta']:>4} {r['per_step']:>5} {r['gflop_per_step']:>7.1f} "
              f"{r['gflops_cpu']:>8.0f} ({r['gflops_cpu_min']:.0f}–{r['gflops_cpu_max']:.0f})"
              .ljust(35) + f"{r['gflops_wall']:>6.0f}")
    print(f"all: {total / cpu_s:.0f} GFLOP/s by CPU time ({cpu_s:.2f} s of one core per step)")


if __name__ == "__main__":
    main()
