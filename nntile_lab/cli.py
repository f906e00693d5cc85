"""The ``nntile-lab`` command: everything the notebooks do, with ``--json`` for scripts."""
from __future__ import annotations

import argparse
import json
import os
import sys

from nntile_lab.bench import schedulers, train
from nntile_lab.bench.depth import register_cli as register_bench_depth
from nntile_lab.bench.kernels import register_cli as register_bench_kernels
from nntile_lab.bench.memory import register_cli as register_bench_memory
from nntile_lab.bench.schedulers import SCHEDULERS, add_run_options
from nntile_lab.data.prepare import register_cli as register_prepare
from nntile_lab.errors import os_error_message
from nntile_lab.figures.cli import register_cli as register_figures
from nntile_lab.memory import register_cli as register_plan
from nntile_lab.options import int_range
from nntile_lab.proxies.cli import register_cli as register_proxy
from nntile_lab.record import json_safe, write_record
from nntile_lab.spec import DEFAULTS, add_arguments, from_args
from nntile_lab.sweep.cli import register_cli as register_sweep
from nntile_lab.trace.cli import register_cli as register_trace
from nntile_lab.train.cli import register_cli as register_train

# The spec fields ``bench train`` takes (no training schedule: it times a few steps).
BENCH_GROUPS = ("model", "data", "tiles", "runtime", "bench")


def _bench_gemm(args) -> int:
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.bench import gemm
    res = gemm.run(n=args.n, tiles=args.tiles, repeats=args.repeats, ncpu=args.ncpu,
                   **({"scheduler": args.scheduler} if args.scheduler else {}))
    print(json.dumps(res) if args.json else gemm.report(res))
    return 0


def _bench_train(args) -> int:
    spec = from_args(args, BENCH_GROUPS)
    res = train.run(spec, vs_torch=args.vs_torch, torch_compile=args.torch_compile)
    if args.record:
        write_record(args.record, spec, res, kind="bench-train")
    print(json.dumps(res) if args.json else train.report(res))
    return 0


def _bench_schedulers(args) -> int:
    base = from_args(args, SCHEDULER_GROUPS, base={"n_layer": 8})
    names = [n for n in args.schedulers.split(",") if n]
    summary, df = schedulers.run(base, names, args.repeats,
                                 None if args.no_ooc else args.ooc_fraction, args.ooc_dir,
                                 cache_dir=args.cache, isolate=not args.in_process,
                                 progress=not args.no_progress)
    for m in df.attrs.get("messages", []):
        print(f"nntile-lab bench schedulers: {m}", file=sys.stderr)
    paths = schedulers.write(summary, df, args.out, base) if args.out else {}
    if args.json:
        print(json.dumps(json_safe({"base": base.to_dict(), "summary": summary.to_dict("records"),
                                    "files": {k: str(v) for k, v in paths.items()}}),
                         default=str))
    else:
        print(schedulers.table(summary))
        if paths:
            print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0 if summary["error"].isna().any() else 1


def _sched_default():
    return SCHEDULERS


# ``bench schedulers``: the model and its tiles; the runtime fields it varies are its own
SCHEDULER_GROUPS = ("model", "data", "tiles", "runtime", "bench")
SCHEDULER_VARIED = ("scheduler", "priorities", "memory_limit_mb", "ooc_dir", "ooc_size_mb")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nntile-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="benchmarks against baselines measured in the same run")
    bsub = bench.add_subparsers(dest="what", required=True)
    g = bsub.add_parser("gemm", help="tiled sgemm vs numpy matmul")
    g.add_argument("--n", type=int_range(), default=4096, help="matrix size (default 4096)")
    g.add_argument("--tiles", type=int_range(), nargs="+", default=[256, 512, 1024])
    g.add_argument("--repeats", type=int_range(), default=5)
    g.add_argument("--scheduler", default=None,
                   help=f"StarPU scheduling policy (default {DEFAULTS.scheduler})")
    g.add_argument("--ncpu", type=int_range(), default=None)
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

    sc = bsub.add_parser("schedulers", help="StarPU policies with and without task "
                         "priorities, in memory and out of core (8-layer main job)")
    add_arguments(sc, SCHEDULER_GROUPS, titles={"model": "model (default: the main job with "
                                                "8 layers)"}, skip=SCHEDULER_VARIED)
    sc.add_argument("--schedulers", default=",".join(_sched_default()),
                    help="comma list (default %(default)s)")
    add_run_options(sc, "cell", "the planned peak")
    sc.add_argument("--cache", metavar="DIR", help="point cache (as for nntile-lab sweep)")
    sc.add_argument("--out", metavar="DIR", help="write schedulers.png, .md and .json here")
    sc.set_defaults(func=_bench_schedulers)
    register_bench_kernels(bsub)

    register_bench_memory(bsub)
    register_bench_depth(bsub)
    register_prepare(sub)
    register_train(sub)
    register_trace(sub)
    register_sweep(sub)
    register_figures(sub)
    register_plan(sub)
    register_proxy(sub)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("MPLBACKEND", "Agg")   # the CLI draws files, never windows
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, RuntimeError, OSError) as exc:   # OSError: disk full, ...
        # a raw file-system error (errno set); one raised with our own text keeps it
        text = os_error_message(exc) if isinstance(exc, OSError) and exc.errno else exc
        print(f"nntile-lab: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:   # Ctrl-C: the shell's code for SIGINT, no traceback
        notes = "".join(f"; {n}" for n in getattr(exc, "__notes__", ()))
        print(f"nntile-lab: interrupted{notes}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
