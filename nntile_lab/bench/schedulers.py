"""StarPU scheduling policies with and without task priorities, in memory and out of core.

    nntile-lab bench schedulers [--n-layer 8 ...] [--schedulers dmdasd,dmdas,lws,eager,
        heteroprio] [--repeats 3] [--ooc-fraction 0.5 | --no-ooc] [--out DIR] [--json]

Every (memory mode, scheduler, priorities) cell runs ``repeats`` times (seeds base.seed,
base.seed+1, …) through the sweep engine (``nntile_lab.sweep.run``: a fresh process per
point, cached), each a few traced training steps (``warmup_steps``, ``measure_steps``).
Per cell: the median over repeats of each repeat's median step time, its spread (min–max
of those medians), and from the traces (``trace.idle``) the idle share, the runtime
overhead (worker time not executing kernels while a task was ready) and the share of
step time both workers waited for Python to submit.

Out of core: the StarPU RAM cap is ``ooc_fraction`` of the memory planner's peak for the
step (at least what the workers' largest tasks need at once, plus a quarter), with a disk
node in ``ooc_dir``: tiles must be evicted and read back every step.
Policies that cannot take priorities (heteroprio, ``runtime.NO_PRIORITIES``) run without
them only.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from nntile_lab import memory
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.jupyter_figure import Figure
from nntile_lab.options import float_range, int_range
from nntile_lab.record import write_record
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import run as sweep_run

SCHEDULERS = ("dmdasd", "dmdas", "lws", "eager", "heteroprio")
MiB = 1 << 20
IN_MEMORY = "in memory"


def default_base() -> ExperimentSpec:
    """The main job, 8 layers deep (L8 E256 T128 B8, full GPT-2 vocabulary)."""
    return ExperimentSpec(n_layer=8)


def default_ooc_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "nntile_lab_bench_ooc")


def out_of_core(spec: ExperimentSpec, fraction: float, ooc_dir: str) -> ExperimentSpec:
    """``spec`` with a RAM cap at ``fraction`` of its planned peak and a disk node."""
    if not 0 < fraction < 1:
        raise ValueError(f"ooc_fraction={fraction!r} must be between 0 and 1 (a cap below the "
                         "step's peak, so that tiles are evicted)")
    plan = memory.estimate(spec.replace(memory_limit_mb=None, ooc_dir=None))
    ncpu = plan.details["ncpu"]
    floor = math.ceil(1.25 * ncpu * plan.largest_task_bytes / MiB)
    cap = max(math.ceil(fraction * plan.peak_bytes / MiB), floor, 16)
    if cap * MiB >= plan.peak_bytes:
        raise ValueError(f"ooc_fraction={fraction} gives a cap of {cap} MiB, not below the "
                         f"step's peak of {plan.peak_bytes / MiB:.0f} MiB (the largest tasks "
                         "need that much): nothing would be evicted; use a larger model")
    return spec.replace(memory_limit_mb=cap, ooc_dir=ooc_dir,
                        ooc_size_mb=max(math.ceil(1.2 * plan.peak_bytes / MiB), 64))


def add_run_options(parser, repeats_of: str, peak_of: str) -> None:
    """The options ``bench schedulers`` and ``bench depth`` share: repeats, the
    out-of-core cap and disk node, where points run, and the output form."""
    parser.add_argument("--repeats", type=int_range(), default=3,
                        help=f"runs per {repeats_of} (default 3)")
    parser.add_argument("--ooc-fraction", type=float_range(0, 1, lo_open=True), default=0.5,
                        help=f"out-of-core RAM cap as a fraction of {peak_of} (default 0.5)")
    parser.add_argument("--no-ooc", action="store_true", help="in memory only")
    parser.add_argument("--ooc-dir", default=None, help="disk node directory (default a "
                        "directory in the system's temp dir)")
    parser.add_argument("--in-process", action="store_true",
                        help="run points in this process")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def mode_of(row) -> str:
    cap = row["memory_limit_mb"]
    if cap is None or (isinstance(cap, float) and math.isnan(cap)):
        return IN_MEMORY
    return f"out of core ({int(cap)} MiB cap)"


def points(base: ExperimentSpec, schedulers=SCHEDULERS, repeats: int = 3,
           ooc_fraction: float | None = 0.5, ooc_dir: str | None = None) -> list:
    """Every point of the comparison (see the module docstring)."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import NO_PRIORITIES
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be ≥ 1")
    modes = [base.replace(memory_limit_mb=None, ooc_dir=None)]
    if ooc_fraction:
        modes.append(out_of_core(base, ooc_fraction, ooc_dir or default_ooc_dir()))
    out = []
    for mode in modes:
        for sched in schedulers:
            for prio in (False, True):
                if prio and sched in NO_PRIORITIES:
                    continue
                out += [mode.replace(scheduler=sched, priorities=prio, seed=base.seed + r)
                        for r in range(repeats)]
    return out


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, scheduler, priorities): medians over repeats and their spread."""
    df = df.assign(mode=[mode_of(r) for _, r in df.iterrows()])
    rows = []
    for (mode, sched, prio), g in df.groupby(["mode", "scheduler", "priorities"], sort=False):
        good = g[g["error"].isna() & g["step_time_s"].notna()]
        row = {"mode": mode, "scheduler": sched, "priorities": bool(prio),
               "repeats": len(good), "error": None if len(good) else g["error"].iloc[0]}
        if len(good):
            t = good["step_time_s"].astype(float)
            med = float(t.median())
            row |= {"step_ms": med * 1e3, "step_min_ms": float(t.min()) * 1e3,
                    "step_max_ms": float(t.max()) * 1e3,
                    "spread": float(t.max() - t.min()) / med,
                    "gflops": float(good["gflops"].astype(float).median())}
            for m in ("idle_share", "overhead_share", "waiting_share",
                      "both_idle_submission_share"):
                vals = good[m].astype(float) if m in good else pd.Series(dtype=float)
                row[m] = float(vals.median()) if vals.notna().any() else None
        rows.append(row)
    return pd.DataFrame(rows)


def table(summary: pd.DataFrame) -> str:
    """Plain-text table of ``summarize``'s rows (the markdown in BENCHMARKS.md is this)."""
    head = ("| mode | scheduler | priorities | step ms (median) | min–max ms | spread | "
            "GFLOP/s | idle | overhead | Python-wait |")
    lines = [head, "|" + "---|" * 10]
    for _, r in summary.iterrows():
        if r.get("error"):
            lines.append(f"| {r['mode']} | {r['scheduler']} | {'on' if r['priorities'] else 'off'}"
                         f" | failed: {r['error'][:80]} |||||||")
            continue

        def pct(v):
            return "—" if v is None or v != v else f"{100 * v:.1f}%"
        lines.append(f"| {r['mode']} | {r['scheduler']} | {'on' if r['priorities'] else 'off'} "
                     f"| {r['step_ms']:.0f} | {r['step_min_ms']:.0f}–{r['step_max_ms']:.0f} | "
                     f"{pct(r['spread'])} | {r['gflops']:.1f} | {pct(r['idle_share'])} | "
                     f"{pct(r['overhead_share'])} | {pct(r['both_idle_submission_share'])} |")
    return "\n".join(lines)


def figure(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Per memory mode: step time per scheduler, priorities off and on side by side (bars:
    median over repeats, whiskers min–max), and the idle share under it; × = failed."""
    modes = list(dict.fromkeys(summary["mode"])) or [IN_MEMORY]
    fig = Figure(figsize=(5.5 * len(modes), 6.5), layout="constrained")
    axes = fig.subplots(2, len(modes), squeeze=False)
    for j, mode in enumerate(modes):
        s = summary[summary["mode"] == mode]
        scheds = list(dict.fromkeys(s["scheduler"]))
        top, bottom = axes[0][j], axes[1][j]
        for k, prio in enumerate((False, True)):
            xs, hs, lo, hi, idle, bad = [], [], [], [], [], []
            for i, sched in enumerate(scheds):
                r = s[(s["scheduler"] == sched) & (s["priorities"] == prio)]
                if not len(r):
                    continue
                r = r.iloc[0]
                x = i + (k - 0.5) * 0.4
                if r.get("error") or pd.isna(r.get("step_ms")):
                    bad.append(x)
                    continue
                xs.append(x)
                hs.append(r["step_ms"])
                lo.append(r["step_ms"] - r["step_min_ms"])
                hi.append(r["step_max_ms"] - r["step_ms"])
                idle.append(100 * (r["idle_share"] or 0.0))
            label = f"priorities {'on' if prio else 'off'}"
            color = "tab:orange" if prio else "tab:blue"
            top.bar(xs, hs, width=0.4, yerr=[lo, hi], capsize=3, label=label, color=color)
            bottom.bar(xs, idle, width=0.4, label=label, color=color)
            if bad:
                top.plot(bad, np.zeros(len(bad)), "x", color="crimson", ms=9)
        for ax in (top, bottom):
            ax.set_xticks(range(len(scheds)), scheds, rotation=30, ha="right")
            ax.grid(axis="y", alpha=0.3)
        top.set_title(mode)
        top.set_ylabel("step time, ms (median of repeats; min–max)")
        bottom.set_ylabel("idle share of worker time, %")
        top.legend(fontsize="small")
    fig.suptitle(title or "Schedulers and priorities")
    return fig


def run(base: ExperimentSpec | None = None, schedulers=SCHEDULERS, repeats: int = 3,
        ooc_fraction: float | None = 0.5, ooc_dir: str | None = None, cache_dir=None,
        isolate: bool = True, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(summary, every point's row)``; see ``summarize`` and ``sweep.run``."""
    base = base or default_base()
    df = sweep_run(points(base, schedulers, repeats, ooc_fraction, ooc_dir), cache_dir,
                   isolate=isolate, progress=progress)
    return summarize(df), df


def write(summary: pd.DataFrame, df: pd.DataFrame, out, base: ExperimentSpec) -> dict:
    """schedulers.png, schedulers.md (the table), schedulers.json (record) in ``out``."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"png": out / "schedulers.png", "md": out / "schedulers.md",
             "json": out / "schedulers.json"}
    title = (f"Schedulers and priorities: L{base.n_layer} E{base.n_embd} T{base.seq_len} "
             f"B{base.batch} V{base.vocab_size}")
    tmp = out / ".schedulers.png.tmp"
    figure(summary, title).savefig(tmp, dpi=110, format="png")
    tmp.replace(paths["png"])
    atomic_write_bytes(paths["md"], (table(summary) + "\n").encode())
    write_record(paths["json"], base, {"summary": summary.to_dict("records"),
                                       "points": df.to_dict("records")},
                 kind="bench-schedulers")
    return paths
