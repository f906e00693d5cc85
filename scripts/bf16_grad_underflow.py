"""Does bf16 training need a loss scale? Counts, over a run of the main job in bf16, what
the bf16 copies of the activation gradients lose: every float32 gradient a bf16 GEMM reads
(dy of each linear layer, the attention's dheads and dscores, the head's dlogits) is
inspected before its conversion — its smallest nonzero magnitude, how many values fall
below float32's (and bf16's: the same) smallest normal, 2⁻¹²⁶, and how many nonzero values
the conversion turns into zeros.

    .venv/bin/python scripts/bf16_grad_underflow.py [--steps 60] [--every 10]

Prints one JSON line per inspected step and a summary (docs/precision.md, "Loss scale")."""
from __future__ import annotations

import argparse
import json
import math

import ml_dtypes
import numpy as np

from nntile_lab.experiment import build, runtime, train_split, train_step
from nntile_lab.nn.precision import F32, Casts
from nntile_lab.spec import ExperimentSpec

NORMAL_MIN = 2.0**-126


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    args = ap.parse_args()
    spec = ExperimentSpec(precision="bf16", steps=args.steps)
    stats = {"on": False}
    operand = Casts.operand

    def watched(self, t, s, fp32=None):
        if stats["on"] and self.gemm_bf16 and t.dtype == F32:
            a = t.to_numpy()
            nz = a[a != 0]
            b = a.astype(ml_dtypes.bfloat16).astype(np.float32)
            stats["values"] += a.size
            stats["nonzero"] += nz.size
            stats["flushed"] += int(np.count_nonzero((a != 0) & (b == 0)))
            stats["subnormal"] += int(np.count_nonzero(np.abs(nz) < NORMAL_MIN))
            if nz.size:
                stats["min"] = min(stats["min"], float(np.abs(nz).min()))
                stats["p001"].append(float(np.quantile(np.abs(nz), 1e-3)))
                stats["max"] = max(stats["max"], float(np.abs(nz).max()))
        return operand(self, t, s, fp32)

    Casts.operand = watched
    batches = train_split(None)
    rows = []
    with runtime(spec) as rt:
        model, opt, schedule = build(spec)
        rng = np.random.default_rng(spec.seed)
        for k in range(args.steps):
            inspect = k == 0 or (k + 1) % args.every == 0
            stats.update(on=inspect, values=0, nonzero=0, flushed=0, subnormal=0,
                         min=math.inf, max=0.0, p001=[])
            loss, norm = train_step(model, opt, batches, rng, batch=spec.batch,
                                    seq_len=spec.seq_len, grad_accum=spec.grad_accum,
                                    lr=schedule(k), clip_norm=spec.clip or None)
            rt.wait()
            if inspect:
                row = {"step": k + 1, "loss": loss, "grad_norm": norm,
                       **{n: stats[n] for n in ("values", "nonzero", "flushed", "subnormal",
                                                "min", "max")},
                       "p0.1%_min": min(stats["p001"])}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(json.dumps({"summary": True, "steps": args.steps,
                      "flushed": sum(r["flushed"] for r in rows),
                      "subnormal": sum(r["subnormal"] for r in rows),
                      "smallest": min(r["min"] for r in rows),
                      "log2_headroom": math.log2(min(r["min"] for r in rows) / NORMAL_MIN)}))


if __name__ == "__main__":
    main()
