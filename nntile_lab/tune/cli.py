"""``nntile-lab tune``: the tiling with the highest measured throughput for a model here.

    nntile-lab tune [model, data, runtime options] [--budget 3m]
                    [--inner-tile 256,512 ...] [--out DIR] [--cache DIR] [--json]

The options are the spec's (the model, batch, precision, workers, memory cap). A tile option
with one value fixes that tile; with several (``256,512``, or ``LOW:HIGH:STEP``) it is an axis
of those values; a tile left out is the tuner's to choose (batch, MLP, head and vocabulary
tiles; the embedding and sequence tiles stay whole). Each measured point is printed with a
progress bar; the end is the chosen tiling, its GFLOP/s and the command line that trains
with it, and ``--out`` (default runs/tune) gets tune.json (the record) and tune.png (measured
against predicted). Bad input — a budget too small for one point, no tiling that fits, every
tile fixed — is one line and exit 2; an interrupted tune keeps its measured points (in the
sweep's cache) and the same command resumes from them.
"""
from __future__ import annotations

import argparse
import json
import sys

from nntile_lab.engine import json_safe
from nntile_lab.errors import writable_dir
from nntile_lab.spec import TILE_FIELDS, add_arguments, from_args
from nntile_lab.sweep.grid import parse_axes

GROUPS = ("model", "data", "tiles", "runtime", "bench")


def register_cli(subparsers) -> None:
    p = subparsers.add_parser("tune", help="find the tiling with the highest measured "
                              "throughput in a fraction of a sweep's time",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p, [g for g in GROUPS if g != "tiles"],
                  titles={"model": "model (defaults: the main job's)"})
    t = p.add_argument_group("tiles (one value fixes a tile; a comma list or LOW:HIGH:STEP "
                             "is an axis; left out: the tuner chooses)")
    for name in TILE_FIELDS:
        t.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar="V[,V...]")
    r = p.add_argument_group("tune")
    r.add_argument("--budget", default="3m", help="wall time to spend: seconds or 90s, 3m, "
                   "1h (default %(default)s)")
    r.add_argument("--cache", metavar="DIR", help="point store (default the sweep's: "
                   "~/.cache/nntile_lab/sweep or $NNTILE_LAB_CACHE/sweep)")
    r.add_argument("--out", metavar="DIR", default="runs/tune",
                   help="where tune.json and tune.png go (default %(default)s)")
    r.add_argument("--in-process", action="store_true",
                   help="measure in this process (no isolation from StarPU aborts)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--no-progress", action="store_true", help="no progress bar or lines")
    p.set_defaults(func=run_cli)


def run_cli(args) -> int:
    # loads the measuring stack: --help and parsing need none of it
    from nntile_lab.runtime import check_scheduler
    from nntile_lab.tune import tune
    from nntile_lab.tune.run import parse_budget
    parse_budget(args.budget)        # a bad duration: exit 2 before anything
    axes = parse_axes({n: getattr(args, n) for n in TILE_FIELDS
                       if getattr(args, n) is not None})
    fixed = {n: v[0] for n, v in axes.items() if len(v) == 1}
    spec = from_args(args, [g for g in GROUPS if g != "tiles"], base=fixed)
    check_scheduler(spec.scheduler)
    writable_dir(args.out, "--out")
    res = tune(spec, args.budget, axes=axes, cache_dir=args.cache, out=args.out,
               progress=not args.no_progress, isolate=not args.in_process)
    for m in res.messages:
        print(f"nntile-lab tune: {m}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_safe({
            "best": None if res.best is None else {a: getattr(res.best, a) for a in res.axes},
            "gflops": res.gflops, "step_time_s": res.step_time_s, "command": res.command,
            "elapsed_s": res.elapsed_s, "budget_s": res.budget_s, "files": res.files,
            "candidates": res.table.to_dict("records")}), default=str))
    else:
        print(res.report())
        if res.files:
            print(f"wrote {', '.join(res.files.values())}")
    return 0 if res.best is not None else 1
