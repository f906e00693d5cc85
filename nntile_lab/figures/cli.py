"""``nntile-lab figures``: the paper's figures from real runs, or redrawn from records."""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from nntile_lab.figures import FULL, SMOKE, point, redraw, run_figures
from nntile_lab.record import json_safe


def _run(args) -> int:
    if args.from_dir:
        df = redraw(args.from_dir)
        if args.json:
            print(json.dumps(_result(df, args.from_dir, None)))
        else:
            print(f"redrew {len(df)} points into {args.from_dir}")
        return 0 if len(df) else 1
    plan = SMOKE if args.smoke else FULL
    overrides = {k: v for k, v in (("layers", args.layers), ("embds", args.embds),
                                   ("cap_mb", args.cap_mb), ("batch", args.batch),
                                   ("seq_len", args.seq_len), ("ncpu", args.ncpu),
                                   ("scheduler", args.scheduler)) if v is not None}
    if args.no_ooc:
        overrides["ooc"] = False
    if args.no_bf16:
        overrides["bf16"] = False
    plan = dataclasses.replace(plan, **{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in overrides.items()})
    out = args.out or ("runs/figures_smoke" if args.smoke else "runs/figures")
    t0 = time.perf_counter()
    df = run_figures(plan, out, resume=not args.fresh)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps(_result(df, out, seconds)))
    else:
        print(f"{len(df)} points in {seconds:.0f} s; figures, CSV, records and "
              f"summary.md in {out}")
    # a point that ran out of memory is a result (0 in the figure); none at all is a failure
    return 0 if len(df) else 1


def _result(df, out: str, seconds: float | None) -> dict:
    """The ``--json`` document: where the files are and every point's row."""
    files = sorted(str(p) for p in Path(out).iterdir() if p.is_file()) \
        if Path(out).is_dir() else []
    return json_safe({"out": str(out), "points": len(df), "seconds": seconds, "files": files,
                      "rows": df.to_dict("records")})


def _point(args) -> int:
    return point.main([args.job])


def register_cli(sub) -> None:
    p = sub.add_parser("figures", help="the NNTile paper's figures at this machine's scale",
                       description=__doc__)
    p.add_argument("--smoke", action="store_true", help="small sizes: under 5 minutes")
    p.add_argument("--out", help="output folder (default runs/figures[_smoke])")
    p.add_argument("--from", dest="from_dir", metavar="DIR",
                   help="redraw from DIR/records only (no measurement, no StarPU needed)")
    p.add_argument("--layers", type=int, nargs="+", help="layer counts (default 4 8)")
    p.add_argument("--embds", type=int, nargs="+", help="embedding sizes (multiples of 64)")
    p.add_argument("--cap-mb", type=int, help="the memory cap both systems run under (MiB)")
    p.add_argument("--batch", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--ncpu", type=int, help="StarPU workers and torch threads (default: all)")
    p.add_argument("--scheduler", help="nntile_lab's StarPU scheduler (default lws)")
    p.add_argument("--no-ooc", action="store_true",
                   help="no out-of-core runs: nntile_lab beyond the cap shows as 0 too")
    p.add_argument("--no-bf16", action="store_true", help="leave out PyTorch bf16 autocast")
    p.add_argument("--fresh", action="store_true", help="remeasure points already recorded")
    p.add_argument("--json", action="store_true", help="print one JSON object: the output "
                   "folder, its files and every point's row")
    p.set_defaults(func=_run)
    # one point in a process of its own (figures.point), started by figures.run
    pt = sub.add_parser("_figures-point", help=argparse.SUPPRESS)
    pt.add_argument("job", help="the point as JSON")
    pt.set_defaults(func=_point)
