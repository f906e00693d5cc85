"""``nntile-lab bench ...``: every benchmark's command line (the measurements are in the
sibling modules; this module only parses options and prints).

    gemm, train, schedulers, kernels, memory, depth, trace-overhead, submit-cost, generate

(every point that must run in a process of its own — a ``bench memory`` point, a sweep's —
runs through the engine: ``nntile_lab.engine``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from nntile_lab.bench import depth, kernels, memory, schedulers, submit_cost, train
from nntile_lab.bench import generate as gen_bench
from nntile_lab.bench import tune as tune_bench
from nntile_lab.bench.torch_baseline import check_peer
from nntile_lab.engine import json_safe, save_record
from nntile_lab.errors import UsageError, writable_dir
from nntile_lab.options import float_range, int_list, int_range, refuse_given
from nntile_lab.sample.cli import GEN_TILES
from nntile_lab.spec import (
    DEFAULTS,
    PRECISIONS,
    add_arguments,
    from_args,
    given,
    parse_hints,
    spec_fields,
)

# The spec fields ``bench train`` takes (no training schedule: it times a few steps).
BENCH_GROUPS = ("model", "data", "tiles", "runtime", "bench")
# ``bench schedulers``: the model and its tiles; the runtime fields it varies are its own
SCHEDULER_GROUPS = ("model", "data", "tiles", "runtime", "bench")
SCHEDULER_VARIED = ("scheduler", "priorities", "memory_limit_mb", "ooc_dir", "ooc_size_mb")
DEPTH_GROUPS = ("model", "data", "tiles", "runtime", "bench")
# ``bench memory --hints``
HINT_GROUPS = ("model", "data", "tiles", "runtime", "bench")
# (``precision`` is bench memory's own option there: a comma list of precisions)
HINT_SKIP = ("memory_limit_mb", "ooc_dir", "ooc_size_mb", "hints", "precision")


def _ints(option: str, text: str, count: int | None = None) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or (count is not None and len(values) != count):
        raise UsageError(f"{option} {text!r}: give " + (f"{count} integers" if count else
                         "a comma list of integers") + ", e.g. 4,8")
    return values


def register_cli(subparsers) -> None:
    """``nntile-lab bench`` and its subcommands."""
    bench = subparsers.add_parser("bench", help="benchmarks against baselines measured in the "
                                  "same run")
    bsub = bench.add_subparsers(dest="what", required=True)

    g = bsub.add_parser("gemm", help="tiled sgemm vs numpy matmul")
    g.add_argument("--n", type=int_range(), default=4096, help="matrix size (default 4096)")
    g.add_argument("--tiles", type=int_range(), nargs="+", default=[256, 512, 1024])
    g.add_argument("--repeats", type=int_range(), default=5)
    g.add_argument("--scheduler", default=None,
                   help=f"StarPU scheduling policy (default {DEFAULTS.scheduler})")
    g.add_argument("--ncpu", type=int_range(), default=None)
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=_gemm)

    t = bsub.add_parser("train", help="GPT-2 training step throughput (and PyTorch's)")
    add_arguments(t, BENCH_GROUPS, titles={"model": "model (defaults: the main job's)"},
                  skip=("measure_steps", "warmup_steps"))
    t.add_argument("--measure-steps", "--steps", type=int, default=None, metavar="N",
                   dest="measure_steps", help="timed steps (median; default 3)")
    t.add_argument("--warmup-steps", type=int, default=None, metavar="N",
                   help="untimed steps before them, for each system (default 1)")
    t.add_argument("--vs-torch", action="store_true",
                   help="measure nanoGPT-style PyTorch too (eager and torch.compile; the "
                        "ratio is against the faster)")
    t.add_argument("--no-torch-compile", action="store_false", dest="torch_compile",
                   help="with --vs-torch: eager PyTorch only (compiling takes ~30 s)")
    t.add_argument("--with-fp32", action="store_true",
                   help="with a --precision other than fp32: also the fp32 pair (nntile_lab "
                        "fp32, PyTorch fp32) in the same run, and the speed-up over own fp32")
    t.add_argument("--rounds", type=int_range(), default=1, metavar="N",
                   help="measure every series N times, interleaved (shared machines; "
                        "default 1)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    t.add_argument("--record", metavar="FILE", help="also write the run's record (spec, "
                   "versions, machine, results: nntile_lab.engine.record) to FILE")
    t.set_defaults(func=_train)

    gn = bsub.add_parser("generate", help="text generation vs Hugging Face generate: prefill "
                         "and decode tokens/s, batch 1 and 8",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=gen_bench.__doc__)
    gn.add_argument("--models", default="main,e1024",
                    help=f"comma list of {', '.join(gen_bench.MODELS)} (default %(default)s)")
    gn.add_argument("--batches", default="1,8", type=int_list(1),
                    help="batch sizes, comma list (default %(default)s)")
    gn.add_argument("--prompt-len", type=int_range(1), default=32, help="default 32")
    gn.add_argument("--new-tokens", type=int_range(2), default=64, help="default 64")
    gn.add_argument("--rounds", type=int_range(1), default=3, help="interleaved rounds, "
                    "medians (default 3)")
    gn.add_argument("--ncpu", type=int_range(1), default=None, help="StarPU CPU workers and "
                    "PyTorch threads (default: the spec's, else every core)")
    gn.add_argument("--scheduler", default=None,
                    help=f"StarPU scheduling policy (default {DEFAULTS.scheduler})")
    for name in ("embd_tile", "inner_tile", "head_tile", "vocab_tile"):
        gn.add_argument(f"--{name.replace('_', '-')}", type=int_range(1), default=None,
                        help="tile (default: the sample command's)")
    gn.add_argument("--cache-tile", type=int_range(1), default=None,
                    help="positions per KV-cache tile (default all)")
    gn.add_argument("--json", action="store_true", help="print one JSON object")
    gn.add_argument("--record", metavar="FILE", help="also write the run's record to FILE")
    gn.set_defaults(func=_generate)

    sc = bsub.add_parser("schedulers", help="StarPU policies with and without task "
                         "priorities, in memory and out of core (8-layer main job)")
    add_arguments(sc, SCHEDULER_GROUPS, titles={"model": "model (default: the main job with "
                                                "8 layers)"}, skip=SCHEDULER_VARIED)
    sc.add_argument("--schedulers", default=None,
                    help=f"comma list (default {','.join(schedulers.SCHEDULERS)}; with "
                    f"--nopencl: {','.join(schedulers.UNLIKE_SCHEDULERS)})")
    sc.add_argument("--calibrate-steps", type=int_range(0), default=3,
                    help="with --nopencl: training steps under STARPU_CALIBRATE=1 before the "
                    "sweep, so the models know each arch (default 3; 0: none)")
    schedulers.add_run_options(sc, "cell", "the planned peak")
    sc.add_argument("--cache", metavar="DIR", help="point cache (as for nntile-lab sweep)")
    sc.add_argument("--out", metavar="DIR", help="write schedulers.png, .md and .json here")
    sc.set_defaults(func=_schedulers)

    k = bsub.add_parser("kernels", help="every codelet's C kernel against the memory and "
                        "compute roofs measured in the same run (one core)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description=kernels.__doc__)
    k.add_argument("--config", choices=sorted(kernels.CONFIGS), default="main",
                   help="tile sizes: the main job's (default) or a bigger model's")
    k.add_argument("--repeats", type=int_range(), default=7,
                   help="timed repeats (median; default 7)")
    k.add_argument("--only", metavar="OPS", help="comma list of codelets (default all)")
    k.add_argument("--json", action="store_true", help="print one JSON object")
    k.set_defaults(func=_kernels)

    p = bsub.add_parser("memory", help="largest model under a process RAM cap vs PyTorch "
                        "(out of core), or with --hints each memory hint's effect",
                        description=memory.__doc__.split("\n\n")[0])
    p.add_argument("--caps", default="2048,4096", type=int_list(16),
                   help="process RSS caps in MiB, comma list (default %(default)s)")
    p.add_argument("--ooc-dir", default=None, help="disk node directory (default: a new "
                   "directory in the system's temp dir)")
    p.add_argument("--widths", default=None, type=int_list(64),
                   help="n_embd values to search, comma list "
                   f"(default {memory.WIDTHS[0]} … {memory.WIDTHS[-1]})")
    p.add_argument("--max-width", type=int_range(64), default=None,
                   help="widest n_embd nntile_lab tries out of core (default the widest)")
    p.add_argument("--speeds", default="1,2,4", type=int_list(1),
                   help="throughput at these multiples of the "
                   "cap (in-memory peak), comma list (default %(default)s)")
    p.add_argument("--hint-set", default=None, help="memory hints of every nntile_lab point "
                   f"(default {DEFAULTS.hints})")
    p.add_argument("--precision", default=None, metavar="LIST", dest="precisions",
                   help="one precision (fp32, bf16, bf16-storage): the experiment in it, for "
                        "both systems (PyTorch: bf16 autocast for bf16, else fp32); several, "
                        "e.g. fp32,bf16: instead, the models at the --speeds multiples of each "
                        "cap out of core under one RAM cap in each precision (interleaved, "
                        "--repeats rounds): disk bytes per step and throughput, against the "
                        "first (default fp32)")
    p.add_argument("--hints", action="store_true", dest="hints_table",
                   help="instead: out of core under --fraction of the planned peak, disk "
                        "traffic and step time with no hints, all, and all but each one "
                        "(model options below; default the main job)")
    p.add_argument("--fraction", type=float_range(0, 1, lo_open=True), default=0.5,
                   help="with --hints: StarPU's RAM cap as a fraction of the planned peak "
                        "(default %(default)s)")
    p.add_argument("--repeats", type=int_range(), default=1,
                   help="with --hints: runs per hint set; with several --precision: rounds "
                        "(default %(default)s)")
    p.add_argument("--device", action="store_true",
                   help="instead: the paper's setting in miniature — an OpenCL device (PoCL "
                        "without a GPU) capped at --device-cap-mb, RAM as its overflow: "
                        "models at --multiples of the cap on the CPU, on the device uncapped "
                        "and capped; step time, peaks, bytes and transfers per bus")
    p.add_argument("--device-cap-mb", type=int_range(16), default=256,
                   help="with --device: the device's memory cap in MiB (default %(default)s)")
    p.add_argument("--multiples", default="1,2,4", type=int_list(1),
                   help="with --device: model sizes (planned peak) as multiples of the "
                        "device cap, comma list (default %(default)s)")
    p.add_argument("--json", action="store_true",
                   help="progress to stderr, JSON Lines: one object per point, the result last")
    add_arguments(p, HINT_GROUPS, titles={"model": "model (--hints: default the main job; "
                                          "several --precision: changes to the family's, "
                                          "--n-embd pins one model)"}, skip=HINT_SKIP)
    p.set_defaults(func=_memory)

    d = bsub.add_parser("depth", help="throughput per FLOP of deeper GPT-2s against the "
                        "shallowest (4, 12, 24, 36 layers at GPT-2 small's width), in memory "
                        "and out of core, with idle share and critical path per depth",
                        description=depth.__doc__.split("\n\n")[0])
    add_arguments(d, DEPTH_GROUPS, titles={"model": "model (defaults: n_embd 768, 12 heads, "
                                           "T 256, B 4, 2 measured steps)"},
                  skip=("n_layer", "memory_limit_mb", "ooc_dir", "ooc_size_mb"))
    d.add_argument("--layers", default=",".join(map(str, depth.LAYERS)),
                   help="depths, shallowest first: the reference (default %(default)s)")
    schedulers.add_run_options(d, "point", "each model's planned peak")
    d.add_argument("--cache", metavar="DIR", help="point cache (as for nntile-lab sweep)")
    d.add_argument("--out", metavar="DIR", help="write depth.png, .md and .json here")
    d.add_argument("--traces", action="store_true", help="keep each point's trace in the "
                   "cache (with --cache; the rows' trace_dir)")
    d.add_argument("--timeout-s", type=float_range(0, lo_open=True),
                   default=depth.POINT_TIMEOUT_S,
                   help="a point still running after this many seconds is a failed row "
                        "(default %(default)s)")
    d.set_defaults(func=_depth)

    o = bsub.add_parser("trace-overhead", help="what tracing costs: a GPT-2 step with and "
                        "without a Trace, and per tiny task")
    o.add_argument("--repeats", type=int_range(), default=7)
    o.add_argument("--steps", type=int_range(), default=None, help="steps per run (default 3)")
    o.add_argument("--scheduler", default=None,
                   help=f"StarPU scheduling policy (default {DEFAULTS.scheduler})")
    o.add_argument("--big", action="store_true", help="the main job's model (spec defaults)")
    o.add_argument("--bound", action="store_true", help="with the LP bound recording")
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(func=_trace_overhead)

    s = bsub.add_parser("submit-cost", help="µs to submit one task from Python (the "
                        "single-process path of the generated submit helpers)")
    s.add_argument("--tasks", type=int_range(), default=20000)
    s.add_argument("--repeats", type=int_range(), default=7)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_submit_cost)

    tu = bsub.add_parser("tune", help="tune against the exhaustive sweep of the same grid, "
                         "both measured in one run, on five settings",
                         description=tune_bench.__doc__.split("\n\n")[0])
    tu.add_argument("--settings", metavar="LIST", default=None,
                    help="comma list of settings (default all: "
                    + ", ".join(tune_bench.NAMES) + ")")
    tu.add_argument("--share", type=float_range(0, 1, lo_open=True), default=tune_bench.SHARE,
                    help="tune's budget as a share of the sweep's wall time "
                    "(default %(default)s)")
    tu.add_argument("--out", metavar="DIR", help="write bench_tune.md and bench_tune.json here")
    tu.add_argument("--smoke", action="store_true", help="each setting on a tiny model and a "
                    "2×2 grid: the code path in minutes, no result")
    tu.add_argument("--json", action="store_true", help="print one JSON object")
    tu.set_defaults(func=_tune)


def _gemm(args) -> int:
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.bench import gemm
    from nntile_lab.runtime import check_scheduler
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    res = gemm.run(n=args.n, tiles=args.tiles, repeats=args.repeats, ncpu=args.ncpu,
                   **({"scheduler": args.scheduler} if args.scheduler is not None else {}))
    print(json.dumps(res) if args.json else gemm.report(res))
    return 0


def _scheduler(name: str) -> None:
    # the compiled extension: loaded here, so that --help and parsing work without it
    from nntile_lab.runtime import check_scheduler
    check_scheduler(name)   # a mistyped policy is a usage error, not a failed measurement


def _train(args) -> int:
    spec = from_args(args, BENCH_GROUPS)
    _scheduler(spec.scheduler)
    if args.vs_torch:
        try:   # before minutes of measuring nntile_lab
            check_peer(spec.model)
            train.check_torch_precision(spec.precision)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    res = train.run(spec, vs_torch=args.vs_torch, torch_compile=args.torch_compile,
                    with_fp32=args.with_fp32, rounds=args.rounds,
                    progress=lambda m: print(m, file=sys.stderr, flush=True))
    if args.record:
        save_record(args.record, "bench-train", spec, res)
    print(json.dumps(res) if args.json else train.report(res))
    return 0


def _generate(args) -> int:
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m not in gen_bench.MODELS]
    if not models or bad:
        raise UsageError(f"--models {args.models!r}: give a comma list of "
                         f"{', '.join(gen_bench.MODELS)}")
    _scheduler(args.scheduler or DEFAULTS.scheduler)
    load = [_loadavg()]
    results = []
    for name in models:
        sizes = gen_bench.MODELS[name]
        tiles = {k: getattr(args, k, None) if getattr(args, k, None) is not None else v
                 for k, v in GEN_TILES.items()}
        caps = {"embd_tile": sizes["n_embd"], "inner_tile": 4 * sizes["n_embd"],
                "head_tile": sizes["n_head"], "vocab_tile": sizes["vocab_size"]}
        tiles = {k: (min(v, caps[k]) if v is not None and k in caps else v)
                 for k, v in tiles.items()}
        results.append(gen_bench.measure(
            name, [int(b) for b in args.batches.split(",") if b.strip()],
            prompt_len=args.prompt_len, new_tokens=args.new_tokens,
            rounds=args.rounds, ncpu=args.ncpu or DEFAULTS.ncpu or len(os.sched_getaffinity(0)),
            scheduler=args.scheduler or DEFAULTS.scheduler, tiles=tiles,
            cache_tile=args.cache_tile, log=lambda m: print(m, file=sys.stderr, flush=True)))
    load.append(_loadavg())
    res = {"models": results, "loadavg_before": load[0], "loadavg_after": load[1]}
    if args.record:
        save_record(args.record, "bench-generate", None, res, argv=args.argv)
    if args.json:
        print(json.dumps(json_safe(res)))
    else:
        print(gen_bench.report(results))
        print(f"load average before {' '.join(load[0])}, after {' '.join(load[1])}")
    return 0


def _loadavg() -> list[str]:
    """The 1, 5 and 15-minute load averages (a timing on a shared machine says how busy)."""
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[:3]
    except OSError:
        return []


def _no_ooc(args, base) -> None:
    """--no-ooc with an out-of-core option: which one is meant is unclear (it was ignored).
    On OpenCL workers (``base.nopencl``, the checked spec) out of core is off
    (``schedulers.NO_OOC_ON_OPENCL``): an out-of-core option is refused, and the default
    says so (each point used to fail)."""
    if args.no_ooc:
        refuse_given(args, ("ooc_fraction", "ooc_dir"), "sets the out-of-core runs that "
                     "--no-ooc leaves out: give one of them")
    elif base.nopencl:
        refuse_given(args, ("ooc_fraction", "ooc_dir"),
                     f"with --nopencl {args.nopencl}: {schedulers.NO_OOC_ON_OPENCL}")
        print(f"nntile-lab bench {args.what}: in memory only with --nopencl "
              f"{args.nopencl} ({schedulers.NO_OOC_ON_OPENCL})", file=sys.stderr)
        args.no_ooc = True


def _schedulers(args) -> int:
    base = from_args(args, SCHEDULER_GROUPS, base={"n_layer": 8})
    _no_ooc(args, base)
    given = args.schedulers
    if given is None:
        given = ",".join(schedulers.default_schedulers(base))
    names = [n.strip() for n in given.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--schedulers {args.schedulers!r}: give a comma list of policies")
    for name in names:
        try:
            _scheduler(name)
        except UsageError as exc:
            raise UsageError(f"--schedulers {args.schedulers!r}: {exc}") from None
    summary, df = schedulers.run(base, names, args.repeats,
                                 None if args.no_ooc else args.ooc_fraction, args.ooc_dir,
                                 cache_dir=args.cache, isolate=not args.in_process,
                                 progress=not args.no_progress,
                                 calibrate_steps=args.calibrate_steps)
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
    # a failed cell is a result (its row says why); nothing measured is a failure
    return 0 if summary["error"].isna().any() else 1


def _kernels(args) -> int:
    only = None
    if args.only is not None:
        # a mistyped codelet would otherwise silently drop out of the table
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        known = sorted(c.name for c in kernels.cases(kernels.CONFIGS[args.config]))
        unknown = [n for n in only if n not in known]
        if not only or unknown:
            what = f"{', '.join(map(repr, unknown))} unknown" if unknown else "no names"
            raise UsageError(f"--only {args.only!r}: {what}; give a comma list of: "
                             f"{', '.join(known)}")
    res = kernels.run(args.config, args.repeats, only)
    print(json.dumps(res) if args.json else kernels.report(res))
    return 0


# bench memory's experiments and the options each reads (besides --json): any other given
# would be silently ignored, so it is refused naming the experiment it belongs to
_SPEC_DESTS = tuple(f.name for g in HINT_GROUPS for f in spec_fields(g)
                    if f.name not in HINT_SKIP)
CAPACITY = "the capacity experiment (no --device, --hints or --precision A,B)"
MEMORY_MODES = {
    "--device": ("device", "device_cap_mb", "multiples"),
    "--hints": ("hints_table", "fraction", "repeats", "ooc_dir", "precisions", *_SPEC_DESTS),
    "--precision A,B": ("precisions", "caps", "widths", "speeds", "repeats", "ooc_dir",
                            "hint_set", *_SPEC_DESTS),
    CAPACITY: ("precisions", "caps", "widths", "max_width", "speeds",
                                "ooc_dir", "hint_set"),
}


def _memory_mode(args) -> str:
    """Which of bench memory's experiments the options ask for; an option of another one is
    a usage error (``--device --hints`` used to drop --hints, ``--device-cap-mb`` without
    --device was ignored)."""
    if args.device and args.hints_table:
        raise UsageError("--device and --hints are two experiments: give one of them")
    several = args.precisions is not None and "," in args.precisions.strip(", ")
    mode = ("--device" if args.device else "--hints" if args.hints_table
            else "--precision A,B" if several else CAPACITY)
    ours = set(MEMORY_MODES[mode]) | {"json"}
    for dest in dict.fromkeys(d for dests in MEMORY_MODES.values() for d in dests):
        if dest not in ours:
            where = " or ".join(m for m, dests in MEMORY_MODES.items() if dest in dests)
            refuse_given(args, [dest], f"applies only to {where}, not to {mode}")
    return mode


def _memory(args) -> int:

    def progress(msg):
        print(msg, file=sys.stderr if args.json else sys.stdout, flush=True)

    _memory_mode(args)
    _scheduler(from_args(args, HINT_GROUPS).scheduler)   # checked even where unused
    if args.device:
        res = memory.run_device(args.device_cap_mb, tuple(_ints("--multiples", args.multiples)),
                                progress=progress)
        if args.json:
            for row in res["rows"]:
                print(json.dumps(json_safe(row)))
            print(json.dumps(json_safe({k: v for k, v in res.items() if k != "rows"})))
        else:
            print(memory.report_device(res))
        return 0 if any("error" not in r for r in res["rows"]) else 1
    precisions = _precisions(args.precisions)
    if len(precisions) > 1:
        if args.hints_table:
            raise UsageError(f"--precision {args.precisions} with --hints: give one precision "
                             "(the hints table is of one model in one precision)")
        return _memory_precisions(args, precisions, progress)
    prec = {"precision": precisions[0]} if precisions else {}
    if args.hints_table:
        res = memory.run_hints(from_args(args, HINT_GROUPS, base=prec), fraction=args.fraction,
                               ooc_dir=args.ooc_dir, repeats=args.repeats, progress=progress)
        if args.json:
            for row in res["table"]:
                print(json.dumps(json_safe(row)))
            print(json.dumps(json_safe({k: v for k, v in res.items() if k != "rows"})))
        else:
            print(memory.report_hints(res))
        return 0 if any("error" not in t for t in res["table"]) else 1
    caps = _ints("--caps", args.caps)
    widths = tuple(_ints("--widths", args.widths)) if args.widths else memory.WIDTHS
    if args.hint_set is not None:
        try:
            parse_hints(args.hint_set)
        except ValueError as exc:
            raise UsageError(f"--hint-set {args.hint_set!r}: {exc}") from None
    kw = ({"hints": args.hint_set} if args.hint_set is not None else {}) | prec
    res = memory.run(caps, ooc_dir=args.ooc_dir, widths=widths, progress=progress,
                     max_width=args.max_width, speeds=tuple(_ints("--speeds", args.speeds)),
                     **kw)
    if args.json:
        for row in res["rows"]:
            print(json.dumps(json_safe(row)))
        first = res["summary"][caps[0]]
        print(json.dumps(json_safe({"cap_mb": caps[0], "caps_mb": caps,
                                    "capacity_ratio": res["capacity_ratio"],
                                    "throughput_at_2x": res["throughput_at_2x"],
                                    "summary": res["summary"],
                                    "torch_largest_params": first["torch_largest_params"],
                                    "nntile_largest_params": first["nntile_largest_params"]})))
    else:
        print(memory.report(res))
    # a point that did not fit is a result; not one point run is a failure
    return 0 if any("error" not in r for r in res["rows"]) else 1


def _precisions(text: str | None) -> list[str]:
    """``--precision`` of bench memory: a comma list of the spec's precisions (not auto: a
    comparison names what it compares)."""
    if text is None:
        return []
    valid = [p for p in PRECISIONS if p != "auto"]
    got = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in got if p not in valid]
    if not got or bad or len(set(got)) != len(got):
        raise UsageError(f"--precision {text!r}: give distinct precisions from "
                         f"{', '.join(valid)}, a comma list (e.g. fp32,bf16)")
    return got


def _memory_precisions(args, precisions: list[str], progress) -> int:
    """``bench memory --precision A,B``: disk bytes and throughput out of core per precision."""
    caps = _ints("--caps", args.caps)
    widths = tuple(_ints("--widths", args.widths)) if args.widths else memory.WIDTHS
    kw = {"hints": args.hint_set} if args.hint_set is not None else {}
    if args.hint_set is not None:
        try:
            parse_hints(args.hint_set)
        except ValueError as exc:
            raise UsageError(f"--hint-set {args.hint_set!r}: {exc}") from None
    # the model options given change the family's (e.g. --seq-len, --batch); --n-embd pins
    # the model instead of the one nearest each multiple of the cap
    # (not the fields bench memory sets itself, whose options share their names)
    fields = {k: v for k, v in given(args, HINT_GROUPS).items() if k not in HINT_SKIP}
    if "n_embd" in fields:
        widths = (fields.pop("n_embd"),)
    kw |= fields
    from_args(args, HINT_GROUPS, base=memory.BASE)   # a refused combination: exit 2 now
    res = memory.run_precisions(caps, tuple(precisions), ooc_dir=args.ooc_dir, widths=widths,
                                speeds=tuple(_ints("--speeds", args.speeds)),
                                repeats=args.repeats, progress=progress, **kw)
    if args.json:
        for row in res["rows"]:
            print(json.dumps(json_safe(row)))
        print(json.dumps(json_safe({k: v for k, v in res.items() if k != "rows"})))
    else:
        print(memory.report_precisions(res))
    return 0 if any("error" not in t for t in res["table"]) else 1


def _depth(args) -> int:
    _no_ooc(args, from_args(args, DEPTH_GROUPS, base=depth.BASE))
    try:
        layers = depth.check_layers(_ints("--layers", args.layers))
    except ValueError:
        raise UsageError(f"--layers {args.layers!r}: give two or more depths, increasing, "
                         "shallowest first, e.g. 4,12,24,36") from None
    base = from_args(args, DEPTH_GROUPS, base=depth.BASE)
    _scheduler(base.scheduler)
    summary, df = depth.run(base, layers, args.repeats,
                            None if args.no_ooc else args.ooc_fraction, args.ooc_dir,
                            cache_dir=args.cache, isolate=not args.in_process,
                            progress=not args.no_progress, keep_traces=args.traces,
                            timeout_s=args.timeout_s)
    for m in df.attrs.get("messages", []):
        print(f"nntile-lab bench depth: {m}", file=sys.stderr)
    paths = depth.write(summary, df, args.out, base) if args.out else {}
    ph = depth.phases(df) if args.traces and df["trace_dir"].notna().any() else None
    if args.json:
        print(json.dumps(json_safe({"base": base.to_dict(), "summary": summary.to_dict("records"),
                                    "points": df.to_dict("records"),
                                    "phases": None if ph is None else ph.to_dict("records"),
                                    "files": {k: str(v) for k, v in paths.items()}}),
                         default=str))
    else:
        print(depth.table(summary))
        if ph is not None:
            print()
            print(depth.phase_table(ph))
            print()
            print(depth.mix_table(ph))
        if paths:
            print(f"wrote {', '.join(str(p) for p in paths.values())}")
    # as for every grid: a failed point is a row of the result, none measured a failure
    return 0 if summary["error"].isna().any() else 1


def _trace_overhead(args) -> int:
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import check_scheduler
    from nntile_lab.trace import overhead
    spec = overhead.BIG if args.big else overhead.SMALL
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
        spec = spec.replace(scheduler=args.scheduler)
    res = overhead.measure(spec, args.repeats, args.steps or 3, bound=args.bound)
    tiny = overhead.per_task_us(repeats=args.repeats, scheduler=spec.scheduler)
    if args.json:
        print(json.dumps({"step": res, "tiny_tasks": tiny}))
        return 0
    print(overhead.report(res))
    print(f"tiny tasks: {tiny['plain_us_per_task']:.2f} µs/task untraced, tracing adds "
          f"{tiny['trace_us_per_task']:+.2f} µs/task wall, "
          f"{tiny['trace_cpu_us_per_task']:+.2f} µs/task CPU over all threads (medians "
          f"of {tiny['repeats']} paired runs of {tiny['tasks']} tasks)")
    return 0


def _submit_cost(args) -> int:
    r = submit_cost.measure(args.tasks, args.repeats)
    print(json.dumps(r) if args.json else
          f"submit: median {r['median_us']:.2f} µs/task, min {r['min_us']:.2f} "
          f"({r['repeats']} x {r['tasks']} tasks, StarPU-MPI built in: {r['mpi_built']})")
    return 0


def _tune(args) -> int:
    names = None
    if args.settings is not None:
        names = [n.strip() for n in args.settings.split(",") if n.strip()]
        bad = [n for n in names if n not in tune_bench.NAMES]
        if not names or bad:
            raise UsageError(f"--settings {args.settings!r}: give a comma list of: "
                             f"{', '.join(tune_bench.NAMES)}")
    if args.out:
        writable_dir(args.out, "--out")
    res = tune_bench.run(names, args.share,
                         progress=lambda m: print(m, file=sys.stderr, flush=True),
                         smoke=args.smoke)
    paths = tune_bench.write(res, args.out) if args.out else {}
    if args.json:
        print(json.dumps(json_safe(res | {"files": paths}), default=str))
    else:
        print(tune_bench.table(res))
        if paths:
            print(f"wrote {', '.join(paths.values())}")
    return 0 if any("ratio" in r for r in res["rows"]) else 1
