"""``nntile-lab sweep``: a grid of experiment specs from the shell.

    nntile-lab sweep --vocab-tile 2048,4096,8192 --scheduler lws,dmda [--json]
                     [--cache DIR] [--out DIR] [--in-process] [--no-progress]

Every ExperimentSpec field is an option taking a comma list (``--inner-tile 256,512``),
an inclusive range ``LOW:HIGH:STEP`` (``--batch-tile 1:8:1``) or ``none`` (whole
dimension); one value sets the base, several make an axis. A hint set is one value
(``--hints invalidate,wont_use``); several sets are separated by ``/``
(``--hints none/invalidate,wont_use/all``). Points run in fresh
processes (``--in-process`` runs them here), finished points are cached (``--cache``,
default ``~/.cache/nntile_lab/sweep``) so a re-run is instant and an interrupted sweep
resumes. A point that fails (a bad tile, an unknown scheduler, a crash, out of memory)
is a row with its error; the command still measures the rest and exits 0 if any point
ran, 1 if none did. ``--out DIR`` writes sweep.csv, sweep.png and sweep.json (the record:
every point's spec and numbers, with versions and machine).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import json_safe, make_record, write_record
from nntile_lab.errors import writable_dir
from nntile_lab.jupyter_figure import save_figure
from nntile_lab.plots import sweep as plots
from nntile_lab.spec import ExperimentSpec, field_names, spec_fields
from nntile_lab.sweep.grid import InvalidSpec, grid, parse_axes
from nntile_lab.sweep.run import POINT_TIMEOUT_S, run
from nntile_lab.sweep.size import MAX_POINTS, check_size

SHOWN = ("gflops", "tokens_per_s", "mfu", "step_time_s", "utilisation", "idle_share",
         "critical_path_s", "peak_rss_mb")


def register_cli(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help="measure a grid of specs (tiles, schedulers, ...)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    for group in ("model", "data", "tiles", "runtime", "bench"):
        g = p.add_argument_group(f"{group} (comma lists make axes)")
        for f in spec_fields(group):
            g.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, metavar="V[,V...]",
                           help=f.metadata["help"].replace("%", "%%"))
    r = p.add_argument_group("sweep")
    r.add_argument("--cache", metavar="DIR", help="point cache (default "
                   "~/.cache/nntile_lab/sweep or $NNTILE_LAB_CACHE/sweep)")
    r.add_argument("--out", metavar="DIR", help="write sweep.csv, sweep.png, sweep.json here")
    r.add_argument("--in-process", action="store_true",
                   help="run points in this process (no isolation from StarPU aborts)")
    r.add_argument("--timeout", type=float, default=POINT_TIMEOUT_S, metavar="S",
                   help=f"seconds per point before it counts as failed (default "
                        f"{POINT_TIMEOUT_S:g})")
    r.add_argument("--retry-errors", action="store_true", help="re-run cached failed points")
    r.add_argument("--yes", action="store_true",
                   help=f"run a sweep of more than {MAX_POINTS} points (otherwise refused with "
                        "its size and estimated time)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def specs_from_args(args):
    """(points, axis names) from parsed options: single values form the base spec. A sweep
    larger than ``sweep.size.MAX_POINTS`` is refused (before any spec is built) unless
    ``args.yes``."""
    texts = {name: getattr(args, name) for name in field_names()
             if getattr(args, name, None) is not None}
    axes = parse_axes(texts)
    base = {k: v[0] for k, v in axes.items() if len(v) == 1}
    multi = {k: v for k, v in axes.items() if len(v) > 1}
    check_size(multi, base, getattr(args, "yes", False))
    points = grid(ExperimentSpec(), **base, **multi)
    return points, list(multi)


def table(df, axes) -> str:
    cols = [*axes, *SHOWN]
    lines = ["  ".join(f"{c:>12}" for c in cols) + "  error"]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{'—':>12}" if v is None or v != v else
                         f"{v:>12.4g}" if isinstance(v, float) else f"{v!s:>12}")
        lines.append("  ".join(cells) + ("  " + r["error"] if r["error"] else ""))
    return "\n".join(lines)


def write_outputs(df, out, axes, title: str | None = None) -> dict[str, Path]:
    """sweep.csv, sweep.png (tile_figure, or scheduler_figure when only the scheduler
    varies) and sweep.json (a record: rows + environment) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "sweep.csv", "png": out / "sweep.png", "json": out / "sweep.json"}
    atomic_write_bytes(paths["csv"], df.to_csv(index=False).encode())
    fig = (plots.scheduler_figure(df, title) if axes == ["scheduler"]
           else plots.tile_figure(df, title=title))
    save_figure(fig, paths["png"])
    b = plots.best(df)
    write_record(paths["json"], make_record(
        "sweep", None, {"points": df.to_dict("records"),
                        "best": None if b is None else b.to_dict()},
        axes=axes, messages=df.attrs.get("messages", [])))
    return paths


def run_cli(args) -> int:
    if not args.timeout > 0 or args.timeout == float("inf"):
        raise ValueError(f"--timeout {args.timeout}: must be a number of seconds > 0")
    points, axes = specs_from_args(args)
    if points and all(isinstance(p, InvalidSpec) for p in points):
        raise ValueError(f"{points[0].error} (no point of this sweep is valid)")
    if args.out:   # before the first point: a measurement never waits on a bad --out
        writable_dir(args.out, "--out")
    df = run(points, args.cache, isolate=not args.in_process, progress=not args.no_progress,
             timeout_s=args.timeout, retry_errors=args.retry_errors)
    for m in df.attrs["messages"]:
        print(f"nntile-lab sweep: {m}", file=sys.stderr)
    paths = write_outputs(df, args.out, axes) if args.out else {}
    b = plots.best(df)
    if args.json:
        print(json.dumps(json_safe({"axes": axes, "points": df.to_dict("records"),
                                    "best": None if b is None else b.to_dict(),
                                    "messages": df.attrs["messages"],
                                    "files": {k: str(v) for k, v in paths.items()}}),
                         default=str))
    else:
        print(table(df, axes))
        if b is not None:
            print(f"best: {', '.join(f'{a}={b[a]}' for a in axes) or 'the point'}: "
                  f"{b['gflops']:.2f} GFLOP/s, {b['step_time_s'] * 1e3:.1f} ms/step")
        if paths:
            print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0 if b is not None else 1
