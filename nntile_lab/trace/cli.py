"""``nntile-lab trace`` and ``nntile-lab peak``.

    nntile-lab trace --out DIR [--steps N] [--no-peak] -- <train options>

runs N training steps under a Trace and writes into DIR: ``tasks.csv`` (one row per
task) and the other tables (accesses, workers, buses, memory, steps as CSV,
meta.json), ``summary.json`` (metrics.summary), ``run.json`` (the record: spec,
versions, machine, summary), ``trace.json`` (Chrome trace for Perfetto) and the
figures: gantt.png, gantt_step.png (the last step), utilisation.png, memory.png,
transfers.png, nodes.png (memory per node against its cap, transfers per bus),
op_time.png, throughput.png; and where each op ran (``trace.placement``: tasks per op and
kind of worker, printed too): placement.csv, placement.png.

The training options after ``--`` are the fields of ``nntile_lab.spec.ExperimentSpec``
(as for ``nntile-lab train``) and ``--data DIR``; the steps run through
``nntile_lab.trace.training.run_for_trace(spec, steps, data, bound=...)``, which returns
``(trace, memory by category, tokens_per_step)``.

    nntile-lab peak [--refresh] [--json]

prints the machine's sgemm peak (cached; see nntile_lab.sgemm_peak).
"""
from __future__ import annotations

import argparse
import json
import os

from nntile_lab import sgemm_peak
from nntile_lab import spec as specs
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import save_record
from nntile_lab.errors import writable_dir
from nntile_lab.options import OneLineParser, int_range
from nntile_lab.spec import DEFAULTS
from nntile_lab.trace import metrics, placement, viz
from nntile_lab.trace.chrome import write_chrome


def register_cli(subparsers) -> None:
    """Add the ``trace`` and ``peak`` commands to an argparse subparsers object."""
    t = subparsers.add_parser("trace", help="trace training steps: tasks, memory, figures",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--out", required=True, help="directory for the files")
    t.add_argument("--steps", type=int_range(), default=None,
                   help="training steps to trace (default: the spec's measure_steps, "
                   f"{DEFAULTS.measure_steps}), after its warmup_steps "
                   f"({DEFAULTS.warmup_steps}) untraced ones")
    t.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    t.add_argument("--bound", action="store_true",
                   help="also record the tasks for StarPU's LP bound (costs a few %%)")
    t.add_argument("--no-peak", action="store_true",
                   help="skip the sgemm peak (no MFU; saves a few seconds on first use)")
    t.add_argument("train_args", nargs=argparse.REMAINDER,
                   help="after --: options for the trainer")
    t.set_defaults(func=_trace)
    p = subparsers.add_parser("peak", help="the machine's sgemm peak (MFU denominator)")
    p.add_argument("--refresh", action="store_true", help="measure again")
    # default None, as every option named like a spec field (the spec's is a training mode)
    p.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                   help="bf16: also measure the bf16 GEMM (oneDNN) beside fp32, both through "
                        "the tiled kernels on every core (not cached; default fp32)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_peak)


TRAIN_GROUPS = ("model", "data", "tiles", "runtime", "train", "bench")


def train_args_parser() -> argparse.ArgumentParser:
    """The parser of the options after ``--`` (the option fuzz walks it too)."""
    p = OneLineParser(prog="nntile-lab trace --")
    specs.add_arguments(p, TRAIN_GROUPS)
    p.add_argument("--data", metavar="DIR", help="prepared dataset (default: the "
                   "standard-library corpus)")
    return p


def parse_train_args(train_argv: list[str]):
    """``(spec, data dir or None)`` from the options after ``--``."""
    args = train_args_parser().parse_args(train_argv)
    return specs.from_args(args, TRAIN_GROUPS), args.data


def run_training(spec, data, steps: int | None = None, bound: bool = False):
    """(trace, memory by category or None, tokens per step) of the described run:
    ``steps`` (default ``spec.measure_steps``) traced after ``spec.warmup_steps``."""
    # runs tasks: the compiled extension, which --help and the readers here do without
    from nntile_lab.trace import training
    return training.run_for_trace(spec, spec.measure_steps if steps is None else steps,
                                  data, warmup_steps=spec.warmup_steps, profiling=True,
                                  bound=bound)


def write_outputs(tr, out: str, peak_gflops: float | None = None,
                  tokens_per_step: int | None = None) -> dict:
    """Every file of ``nntile-lab trace`` into ``out``; returns the summary."""
    os.makedirs(out, exist_ok=True)
    tr.save(out)
    summary = metrics.summary(tr, peak_gflops=peak_gflops)
    summary["tokens_per_step"] = tokens_per_step
    summary["placement"] = {op: {arch: int(n) for arch, n in row.items()}
                            for op, row in placement.counts(tr).to_dict("index").items()}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=float)
    write_chrome(tr, os.path.join(out, "trace.json"))
    viz.save_all(tr, out)
    write_placement(tr, out)
    return summary


def write_placement(tr, out: str) -> None:
    """placement.csv (one row per op and kind of worker) and placement.png."""
    atomic_write_bytes(os.path.join(out, "placement.csv"),
                       placement.table(tr).to_csv(index=False).encode())
    placement.figure(tr).savefig(os.path.join(out, "placement.png"), dpi=110)


def report(summary: dict) -> str:
    def pct(x):
        return "n/a" if x is None or x != x else f"{100 * x:.1f}%"
    tok = summary["tokens_per_s"]
    lines = [f"{summary['tasks']} tasks, makespan {summary['makespan_s'] * 1e3:.1f} ms, "
             f"{summary['gflops']:.1f} GFLOP/s"
             + (f", {tok:.0f} tokens/s" if tok else "")
             + (f", MFU {pct(summary['mfu'])} of {summary['peak_gflops']:.0f} GFLOP/s"
                if summary["peak_gflops"] else ""),
             f"critical path {summary['critical_path_s'] * 1e3:.1f} ms "
             f"({pct(summary['critical_path_ratio'])} of the makespan); "
             f"mean worker utilisation {pct(summary['utilisation_mean'])}",
             "LP bound " + (f"{summary['lp_bound_s'] * 1e3:.1f} ms" if summary["lp_bound_s"]
                            else f"unavailable: {summary['lp_bound_note']}"),
             f"memory peak {summary['memory_peak_bytes'] / 2**20:.1f} MiB"
             + "".join(f", {k} {v / 2**20:.1f} MiB"
                       for k, v in (summary["memory_by_category"] or {}).items())]
    return "\n".join(lines)


def _trace(args) -> int:
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps {args.steps} must be ≥ 1")
    train_argv = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    spec, data = parse_train_args(train_argv)
    from nntile_lab.runtime import check_scheduler  # the compiled extension, as below
    check_scheduler(spec.scheduler)   # a usage error before any work (exit 2)
    steps = spec.measure_steps if args.steps is None else args.steps
    writable_dir(args.out, "--out")   # before the training: never a trace lost at the end
    tr, memory, tokens_per_step = run_training(spec, data, steps, args.bound)
    if memory and not tr.static_memory:
        tr.static_memory = {k: v for k, v in memory.items() if k != "activations"}
    peak = None
    if not args.no_peak:
        fastest = float(tr.steps["gflops"].max()) if len(tr.steps) else None
        peak = sgemm_peak.gflops(at_least=fastest)
    summary = write_outputs(tr, args.out, peak, tokens_per_step)
    save_record(os.path.join(args.out, "run.json"), "trace", spec,
                {k: v for k, v in summary.items() if k != "workers"}, steps=steps, data=data)
    if args.json:
        print(json.dumps(summary | {"out": args.out}, default=float))
        return 0
    print(report(summary))
    print(placement.report(tr))
    print(f"wrote {args.out}: tasks.csv, trace.json (open in https://ui.perfetto.dev), "
          "gantt.png, utilisation.png, memory.png, transfers.png, nodes.png, op_time.png, "
          "throughput.png, placement.png")
    return 0


def _peak(args) -> int:
    entry = sgemm_peak.cached(refresh=args.refresh)
    if args.precision == "bf16":
        # runs the kernels: loaded here, so that `nntile-lab --help` and the other
        # subcommands start without the compiled extension
        from nntile_lab import precision_peak
        bf16 = precision_peak.measure()
        print(json.dumps({"sgemm_peak": entry, "bf16": bf16}) if args.json
              else f"{sgemm_peak.report(entry)}\n{precision_peak.report(bf16)}")
        return 0
    print(json.dumps(entry) if args.json else sgemm_peak.report(entry))
    return 0
