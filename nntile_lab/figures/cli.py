"""``nntile-lab figures``: the paper's figures from real runs, or redrawn from records;
``--model llama`` draws the Llama family beside GPT-2's."""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from nntile_lab.bench.torch_baseline import PEERS
from nntile_lab.engine import json_safe
from nntile_lab.errors import writable_dir
from nntile_lab.figures import FULL, SMOKE, point, redraw, run_figures
from nntile_lab.figures.family import PRECISIONS, cpu_has_bf16, systems_for
from nntile_lab.figures.records import failed
from nntile_lab.nn.config import model_names
from nntile_lab.options import int_range, refuse_given

# what --from reads: everything else measures, and would be silently ignored by a redraw
FROM_OPTIONS = ("from_dir", "out", "json")


def _run(args) -> int:
    if args.from_dir:
        refuse_given(args, [d for d in args.options_given if d not in FROM_OPTIONS],
                     "is for a measuring run: --from only redraws recorded points (give --from, "
                     "--out and --json, or leave out --from)")
        out = args.out or args.from_dir
        if args.out:
            writable_dir(out, "--out")
        df = redraw(args.from_dir, out)
        if args.json:
            print(json.dumps(_result(df, out, None)))
        else:
            print(f"redrew {len(df)} points from {args.from_dir}/records into {out}")
        return _failures(df)
    _check_options(args)
    plan = SMOKE if args.smoke else FULL
    overrides = {k: v for k, v in (("model", args.model), ("layers", args.layers),
                                   ("embds", args.embds), ("cap_mb", args.cap_mb),
                                   ("batch", args.batch), ("seq_len", args.seq_len),
                                   ("ncpu", args.ncpu),
                                   ("scheduler", args.scheduler)) if v is not None}
    if args.no_ooc:
        overrides["ooc"] = False
    if args.no_torch_compile:
        overrides["torch_compile"] = False
    if args.no_bf16:
        overrides["bf16"] = False
    if args.device:
        overrides["device"] = True
    if args.precision is not None:
        precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
        overrides["systems"] = systems_for(precisions) + (("nntile_lab_device",)
                                                         if args.device else ())
        overrides["bf16"] = "bf16" in precisions
    plan = dataclasses.replace(plan, **{k: tuple(v) if isinstance(v, list) else v
                                        for k, v in overrides.items()})
    family = "" if args.model in (None, "gpt2") else f"_{args.model}"
    out = args.out or f"runs/figures{family}{'_smoke' if args.smoke else ''}"
    writable_dir(out, "--out")   # before the first point, not after minutes of measuring
    t0 = time.perf_counter()
    df = run_figures(plan, out, resume=not args.fresh)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps(_result(df, out, seconds)))
    else:
        print(f"{len(df)} points in {seconds:.0f} s; figures, CSV, records and "
              f"summary.md in {out}")
    return _failures(df)


def _result(df, out: str, seconds: float | None) -> dict:
    """The ``--json`` document: where the files are and every point's row."""
    files = sorted(str(p) for p in Path(out).iterdir() if p.is_file()) \
        if Path(out).is_dir() else []
    return json_safe({"out": str(out), "points": len(df), "seconds": seconds, "files": files,
                      "rows": df.to_dict("records")})


def _failures(df) -> int:
    """1 (and the reasons on stderr) when a point failed for another reason than memory:
    an error is never a result."""
    bad = df[df.status.map(failed)]
    for _, r in bad.iterrows():
        print(f"nntile-lab figures: {r.system} L={r.n_layer} E={r.n_embd} failed: {r.status}: "
              f"{r.error}", file=sys.stderr)
    return 1 if len(bad) else 0


def _check_options(args) -> None:
    """Each option against its range, named as the user typed it (before any point runs)."""
    # the compiled extension: imported here so that --help and --from work without it
    from nntile_lab.runtime import max_workers, scheduler_names
    # the models drawn beside PyTorch's twin; one registered in a notebook has no twin
    if args.model is not None and args.model not in model_names():
        raise ValueError(f"--model {args.model!r}: unknown; choose from "
                         f"{', '.join(PEERS)}")
    if args.model is not None and args.model not in PEERS:
        raise ValueError(f"--model {args.model!r} has no PyTorch counterpart to draw beside "
                         f"it (PyTorch's: {', '.join(PEERS)}): measure it from Python "
                         "(nntile_lab.figures.run_figures) with nntile_lab's series only")
    # ranges (≥ 1, the cap ≥ 16) are checked by argparse (nntile_lab.options.int_range)
    if args.cap_mb is not None and not args.no_ooc:
        # out of core, StarPU's tiles get OOC_TILE_SHARE of the cap, and StarPU takes no
        # limit under 16 MiB (the points' error named --memory-limit-mb, not an option here)
        least = math.ceil(16 / point.OOC_TILE_SHARE)
        if args.cap_mb < least:
            raise ValueError(f"--cap-mb {args.cap_mb}: the out-of-core points give StarPU "
                             f"{point.OOC_TILE_SHARE:g} of the cap for tiles, "
                             f"{int(args.cap_mb * point.OOC_TILE_SHARE)} MiB, under the 16 "
                             f"MiB StarPU needs: give --cap-mb {least} or more, or --no-ooc")
    for v in args.embds or ():
        if v % 64:
            raise ValueError(f"--embds {v}: must be a multiple of 64 (the head size)")
    if args.ncpu is not None and not 1 <= args.ncpu <= max_workers():
        raise ValueError(f"--ncpu {args.ncpu}: must be from 1 to {max_workers()} (this "
                         "StarPU build's STARPU_MAXCPUS)")
    if args.precision is not None:
        precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
        try:
            systems_for(precisions)
        except ValueError as exc:
            raise ValueError(f"--{exc}") from None
        if "bf16" in precisions and args.no_bf16:
            raise ValueError(f"--precision {args.precision} asks for the bf16 series that "
                             "--no-bf16 leaves out: give one of them")
        if "bf16" in precisions and not cpu_has_bf16():
            raise ValueError(f"--precision {args.precision}: the bf16 series need a CPU with "
                             "avx512_bf16 or amx_bf16 (PyTorch's bf16 autocast would be "
                             "emulated here, not a baseline); use --precision fp32")
    if args.scheduler is not None and args.scheduler not in scheduler_names():
        raise ValueError(f"--scheduler {args.scheduler!r}: unknown; choose from "
                         f"{', '.join(scheduler_names())}")


def register_cli(sub) -> None:
    p = sub.add_parser("figures", help="the NNTile paper's figures at this machine's scale",
                       description=__doc__)
    p.add_argument("--smoke", action="store_true", help="small sizes: under 5 minutes")
    p.add_argument("--model", help=f"the family's model: {', '.join(PEERS)} (default "
                   "gpt2: the paper's family; llama: the same L, E and cap, the Llama's own "
                   "MLP width and parameter count, PyTorch's Llama beside it; default --out "
                   "runs/figures_llama[_smoke])")
    p.add_argument("--out", help="output folder (default runs/figures[_smoke]; with --from, "
                   "where the redrawn figures go: default the --from folder)")
    p.add_argument("--from", dest="from_dir", metavar="DIR",
                   help="redraw from DIR/records only (no measurement, no StarPU needed)")
    p.add_argument("--layers", type=int_range(), nargs="+", help="layer counts (default 4 8)")
    p.add_argument("--embds", type=int_range(64), nargs="+",
                   help="embedding sizes (multiples of 64)")
    p.add_argument("--cap-mb", type=int_range(16),
                   help="the memory cap both systems run under (MiB)")
    p.add_argument("--batch", type=int_range())
    p.add_argument("--seq-len", type=int_range())
    p.add_argument("--ncpu", type=int_range(),
                   help="StarPU workers and torch threads (default: all)")
    p.add_argument("--scheduler", help="nntile_lab's StarPU scheduler (default lws)")
    p.add_argument("--no-torch-compile", action="store_true",
                   help="PyTorch eager only (default: the faster of eager and torch.compile "
                        "that fits under the cap, each in its own process)")
    p.add_argument("--no-ooc", action="store_true",
                   help="no out-of-core runs: nntile_lab beyond the cap shows as 0 too")
    p.add_argument("--precision", metavar="LIST",
                   help=f"the series' precisions, a comma list of {', '.join(PRECISIONS)}: "
                   "fp32 = nntile_lab fp32 and PyTorch fp32, bf16 = nntile_lab bf16 and "
                   "PyTorch bf16 autocast (default: both where the CPU has avx512_bf16 or "
                   "amx_bf16, else fp32)")
    p.add_argument("--no-bf16", action="store_true",
                   help="leave out the bf16 series (same as --precision fp32)")
    p.add_argument("--device", action="store_true",
                   help="add the paper's setting: nntile_lab on an OpenCL device (PoCL without "
                        "a GPU) with its memory capped at --cap-mb, RAM as the overflow")
    p.add_argument("--fresh", action="store_true", help="remeasure points already recorded")
    p.add_argument("--json", action="store_true", help="print one JSON object: the output "
                   "folder, its files and every point's row")
    p.set_defaults(func=_run)
