"""The ``nntile-lab`` command: everything the notebooks do, with ``--json`` for scripts."""
from __future__ import annotations

import argparse
import json
import sys

# The spec fields ``bench train`` takes (no training schedule: it times a few steps).
BENCH_GROUPS = ("model", "data", "tiles", "runtime", "bench")


def _bench_gemm(args) -> int:
    from nntile_lab.bench import gemm
    res = gemm.run(n=args.n, tiles=args.tiles, repeats=args.repeats, ncpu=args.ncpu,
                   **({"scheduler": args.scheduler} if args.scheduler else {}))
    print(json.dumps(res) if args.json else gemm.report(res))
    return 0


def _bench_train(args) -> int:
    from nntile_lab.bench import train
    from nntile_lab.spec import from_args
    spec = from_args(args, BENCH_GROUPS)
    res = train.run(spec, vs_torch=args.vs_torch, torch_compile=args.torch_compile)
    if args.record:
        from nntile_lab.record import write_record
        write_record(args.record, spec, res, kind="bench-train")
    print(json.dumps(res) if args.json else train.report(res))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from nntile_lab.spec import DEFAULTS, add_arguments
    parser = argparse.ArgumentParser(prog="nntile-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="benchmarks against baselines measured in the same run")
    bsub = bench.add_subparsers(dest="what", required=True)
    g = bsub.add_parser("gemm", help="tiled sgemm vs numpy matmul")
    g.add_argument("--n", type=int, default=4096, help="matrix size (default 4096)")
    g.add_argument("--tiles", type=int, nargs="+", default=[256, 512, 1024])
    g.add_argument("--repeats", type=int, default=5)
    g.add_argument("--scheduler", default=None,
                   help=f"StarPU scheduling policy (default {DEFAULTS.scheduler})")
    g.add_argument("--ncpu", type=int, default=None)
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=_bench_gemm)

    t = bsub.add_parser("train", help="GPT-2 training step throughput (and PyTorch's)")
    add_arguments(t, BENCH_GROUPS, titles={"model": "model (defaults: the main job's)"},
                  skip=("measure_steps", "warmup_steps"))
    t.add_argument("--measure-steps", "--steps", type=int, default=None, metavar="N",
                   dest="measure_steps", help="timed steps (median; default 3)")
    t.add_argument("--vs-torch", action="store_true",
                   help="measure nanoGPT-style PyTorch too (eager and torch.compile; the "
                        "ratio is against the faster)")
    t.add_argument("--no-torch-compile", action="store_false", dest="torch_compile",
                   help="with --vs-torch: eager PyTorch only (compiling takes ~30 s)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    t.add_argument("--record", metavar="FILE", help="also write the run's record (spec, "
                   "versions, machine, results: nntile_lab.record) to FILE")
    t.set_defaults(func=_bench_train)

    from nntile_lab.data.prepare import register_cli as register_prepare
    from nntile_lab.dist.cli import register_cli as register_proxy
    from nntile_lab.figures.cli import register_cli as register_figures
    from nntile_lab.memory import register_cli as register_plan
    from nntile_lab.sweep.cli import register_cli as register_sweep
    from nntile_lab.trace.cli import register_cli as register_trace
    from nntile_lab.train.cli import register_cli as register_train
    register_prepare(sub)
    register_train(sub)
    register_trace(sub)
    register_sweep(sub)
    register_figures(sub)
    register_plan(sub)
    register_proxy(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, RuntimeError, OSError) as exc:   # OSError: disk full, ...
        print(f"nntile-lab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:   # Ctrl-C: the shell's code for SIGINT, no traceback
        notes = "".join(f"; {n}" for n in getattr(exc, "__notes__", ()))
        print(f"nntile-lab: interrupted{notes}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
