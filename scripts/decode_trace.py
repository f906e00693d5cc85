"""The trace of one decode step (docs/generation.md): the main job's model (or --n-embd),
a prompt of 32 tokens prefilled, then 8 decode steps traced; the Gantt chart of the median
one written to docs/generation_decode_step.png, and per step: tasks by op, the summed task
time, the main thread's CPU time (submitting: Python and cffi) and the wall time.

    .venv/bin/python scripts/decode_trace.py [--n-embd 256] [--batch 1] [--out PNG] [--compare N]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import nntile_lab as nl
from nntile_lab.generate.batching import left_pad
from nntile_lab.nn.decoding import Decoder
from nntile_lab.sample.cli import model_config
from nntile_lab.trace import Trace, viz

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--ncpu", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "docs" / "generation_decode_step.png"))
    ap.add_argument("--compare", type=int, default=0, metavar="N",
                    help="then time N decode steps with the workers asleep during submission "
                         "and N with them polling, alternating (median wall of each)")
    a = ap.parse_args()
    E = a.n_embd
    cfg = model_config(dict(n_layer=4, n_head=E // 64, n_embd=E, n_positions=128,
                            vocab_size=50257), {})        # generation's tiles (GEN_TILES)
    with nl.Runtime(ncpu=a.ncpu) as rt:
        model = nl.GPT2(cfg, seed=0)
        prompts = left_pad([list(range(1, 33))] * a.batch, vocab_size=cfg.vocab_size,
                           n_positions=cfg.n_positions, max_new_tokens=a.steps + 8)
        dec = Decoder(model, a.batch)
        dec.prefill(prompts)
        tokens = np.ones(a.batch, np.int64)
        for c in range(32, 36):              # warm: buffers, performance models
            dec.step(tokens, c)
        walls, cpus = [], []
        tr = Trace(rt).start()
        for c in range(36, 36 + a.steps):
            t0, c0 = time.perf_counter(), time.thread_time()
            dec.step(tokens, c)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.thread_time() - c0)
            tr.mark_step(a.batch)
        tr.stop()
        walls_by = {True: [], False: []}
        for i in range(2 * a.compare):
            dec.workers_asleep = i % 2 == 0
            t0 = time.perf_counter()
            dec.step(tokens, 36 + a.steps + i // 2 % 8)   # columns reused: same work
            walls_by[dec.workers_asleep].append(time.perf_counter() - t0)
        dec.close()
    t = tr.tasks
    per = t.groupby("name").agg(tasks=("duration_us", "size"), us=("duration_us", "sum"))
    per = (per / a.steps).sort_values("us", ascending=False)
    print(f"E={E} B={a.batch}: {len(t) / a.steps:.0f} tasks per decode step, their time "
          f"{t['duration_us'].sum() / a.steps / 1e3:.2f} ms summed; wall "
          f"{statistics.median(walls) * 1e3:.2f} ms, main thread CPU "
          f"{statistics.median(cpus) * 1e3:.2f} ms (medians of {a.steps})")
    print(per.round(1).to_string())
    if a.compare:
        m = {k: statistics.median(v) * 1e3 for k, v in walls_by.items()}
        print(f"decode step wall, median of {a.compare}: workers asleep while submitting "
              f"{m[True]:.2f} ms, polling {m[False]:.2f} ms")
    mid = int(np.argsort(walls)[len(walls) // 2])
    fig = viz.gantt(tr, step=mid, title=f"one decode step (n_embd {E}, batch {a.batch})")
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
