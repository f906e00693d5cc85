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

On unlike workers (``--nopencl 1``: CPU cores and an OpenCL device, docs/accelerators.md)
the default policies are ``UNLIKE_SCHEDULERS`` (dmda, dmdas, heteroprio against eager and
lws), and first ``calibrate`` trains a few steps under ``STARPU_CALIBRATE=1`` so that the
history models hold both architectures (``nntile_lab.perfmodels``; what they learned is
kept: ``perfmodels.csv``). Per cell, from the points' traces (``trace.placement``): the
share of tasks and of kernel time on the OpenCL device, and the share of the tasks of ops
that both kinds can run that ran on the kind the models call faster (``on_faster``).
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from nntile_lab import memory, perfmodels
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import save_record
from nntile_lab.jupyter_figure import save_figure
from nntile_lab.options import float_range, int_range
from nntile_lab.plots.schedulers import IN_MEMORY, figure, is_placed
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import run as sweep_run

SCHEDULERS = ("dmdasd", "dmdas", "lws", "eager", "heteroprio")
# on CPU + OpenCL workers: the model-driven policies and heteroprio against the greedy ones
UNLIKE_SCHEDULERS = ("dmda", "dmdas", "heteroprio", "eager", "lws")
MiB = 1 << 20


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


# out of core under OpenCL workers: StarPU 1.3 livelocks with a disk node below a device's
# memory (runtime.OPENCL_WITH_DISK); the comparisons on unlike workers run in memory only
NO_OOC_ON_OPENCL = ("a disk node under an OpenCL device's memory livelocks StarPU 1.3 "
                    "(docs/accelerators.md): OpenCL workers compare in memory only")


def check_ooc_on_opencl(base: ExperimentSpec, ooc_fraction) -> None:
    """Refuse out-of-core points on OpenCL workers before any point runs (each failed
    after the calibration, naming --ooc-dir/--memory-limit-mb but not the fix)."""
    if ooc_fraction and base.nopencl:
        raise ValueError(f"ooc_fraction={ooc_fraction} with nopencl={base.nopencl}: "
                         f"{NO_OOC_ON_OPENCL}; give ooc_fraction=None (--no-ooc)")


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


def default_schedulers(base: ExperimentSpec) -> tuple[str, ...]:
    """The policies compared by default: ``UNLIKE_SCHEDULERS`` with OpenCL workers."""
    return UNLIKE_SCHEDULERS if base.nopencl else SCHEDULERS


def points(base: ExperimentSpec, schedulers=None, repeats: int = 3,
           ooc_fraction: float | None = 0.5, ooc_dir: str | None = None) -> list:
    """Every point of the comparison (see the module docstring)."""
    schedulers = default_schedulers(base) if schedulers is None else schedulers
    if isinstance(schedulers, str):   # one name, not its letters ("unknown scheduler 'e'")
        schedulers = (schedulers,)
    if not all(isinstance(s, str) for s in schedulers):
        raise TypeError(f"schedulers={schedulers!r}: give policy names, a list of str (or one "
                        "str), e.g. ['lws', 'dmda']")
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be ≥ 1")
    check_ooc_on_opencl(base, ooc_fraction)
    modes = [base.replace(memory_limit_mb=None, ooc_dir=None)]
    if ooc_fraction:
        modes.append(out_of_core(base, ooc_fraction, ooc_dir or default_ooc_dir()))
    out = []
    for mode in modes:
        for sched in schedulers:
            for prio in (False, True):
                out += [mode.replace(scheduler=sched, priorities=prio, seed=base.seed + r)
                        for r in range(repeats)]
    return out


def calibrate(base: ExperimentSpec, steps: int = 3) -> pd.DataFrame:
    """Per-arch history models for ``base``'s workers before the comparison (in memory,
    ``perfmodels.calibrate``); returns their entries (``perfmodels.entries``)."""
    return perfmodels.calibrate(base.replace(memory_limit_mb=None, ooc_dir=None), steps)


PLACEMENT = ("opencl_task_share", "opencl_time_share", "on_faster")


def placement_of(trace_dir, faster: dict[str, str] | None = None) -> dict:
    """From a point's saved trace: the share of its tasks and of its kernel time on OpenCL
    workers, and (``faster``: op → the arch the models call faster, for ops both kinds
    ran) the share of those ops' tasks that ran on that arch."""
    # reads a saved trace (the recorder module loads the compiled extension)
    from nntile_lab.trace.placement import arch_of
    from nntile_lab.trace.recorder import Trace
    try:
        t = Trace.load(trace_dir).tasks
    except ValueError:   # TraceError: a cached point whose trace is gone or damaged
        return dict.fromkeys(PLACEMENT)
    if t.empty:
        return dict.fromkeys(PLACEMENT)
    arch = np.array([arch_of(n) for n in t["worker_name"]], dtype=object)
    ocl = arch == "opencl"
    total = float(t["duration_us"].sum())
    out = {"opencl_task_share": float(ocl.mean()),
           "opencl_time_share": float(t["duration_us"][ocl].sum()) / total if total else None,
           "on_faster": None}
    if faster:
        want = t["name"].map(faster)
        both = want.notna().to_numpy()
        if both.any():
            out["on_faster"] = float((arch[both] == want[both].to_numpy()).mean())
    return out


def faster_arch(models: pd.DataFrame | None) -> dict[str, str]:
    """op → the arch the models call faster, for ops measured on CPU and OpenCL
    (``perfmodels.per_arch``'s rows)."""
    if models is None or models.empty or not {"cpu_us", "opencl_us"} <= set(models.columns):
        return {}
    both = models[models["cpu_us"].notna() & models["opencl_us"].notna()]
    return dict(zip(both["op"], both["faster"]))


def summarize(df: pd.DataFrame, models: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (mode, scheduler, priorities): medians over repeats and their spread;
    on OpenCL workers also where the tasks ran (``placement_of``; ``models``: the
    ``perfmodels.per_arch`` table that says which arch is faster per op)."""
    # None: the runtime's default, on (a sweep that does not vary them leaves it unset)
    prio = [True if p is None or p != p else bool(p) for p in df["priorities"]]
    df = df.assign(mode=[mode_of(r) for _, r in df.iterrows()], priorities=prio)
    unlike = "nopencl" in df and bool((df["nopencl"].fillna(0) > 0).any())
    faster = faster_arch(models)
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
            if unlike:
                placed = pd.DataFrame([placement_of(d, faster) for d in good["trace_dir"]
                                       if d is not None], columns=list(PLACEMENT))
                for m in PLACEMENT:
                    vals = placed[m].astype(float)
                    row[m] = float(vals.median()) if vals.notna().any() else None
        rows.append(row)
    return pd.DataFrame(rows)


def table(summary: pd.DataFrame) -> str:
    """Plain-text table of ``summarize``'s rows (the markdown in BENCHMARKS.md is this);
    on OpenCL workers with the placement columns."""
    placed = is_placed(summary)
    head = ("| mode | scheduler | priorities | step ms (median) | min–max ms | spread | "
            "GFLOP/s | idle | overhead | Python-wait |")
    ncol = 10
    if placed:
        head += " tasks on OpenCL | kernel time on OpenCL | on the faster arch |"
        ncol += 3
    lines = [head, "|" + "---|" * ncol]

    def pct(v):
        return "—" if v is None or v != v else f"{100 * v:.1f}%"
    for _, r in summary.iterrows():
        if r.get("error"):
            lines.append(f"| {r['mode']} | {r['scheduler']} | {'on' if r['priorities'] else 'off'}"
                         f" | failed: {r['error'][:80]} |" + "|" * (ncol - 4))
            continue
        line = (f"| {r['mode']} | {r['scheduler']} | {'on' if r['priorities'] else 'off'} "
                f"| {r['step_ms']:.0f} | {r['step_min_ms']:.0f}–{r['step_max_ms']:.0f} | "
                f"{pct(r['spread'])} | {r['gflops']:.1f} | {pct(r['idle_share'])} | "
                f"{pct(r['overhead_share'])} | {pct(r['both_idle_submission_share'])} |")
        if placed:
            line += "".join(f" {pct(r.get(m))} |" for m in PLACEMENT)
        lines.append(line)
    return "\n".join(lines)


def models_table(models: pd.DataFrame) -> str:
    """``perfmodels.per_arch``'s rows as markdown: what the models learned per op."""
    archs = [a for a in ("cpu", "opencl", "cuda") if f"{a}_us" in models]
    head = ("| op | " + " | ".join(f"{a} µs" for a in archs)
            + " | OpenCL / CPU | faster | footprints | samples |")
    lines = [head, "|" + "---|" * (len(archs) + 5)]
    for _, r in models.iterrows():
        times = " | ".join("—" if r[f"{a}_us"] != r[f"{a}_us"] else f"{r[f'{a}_us']:.1f}"
                           for a in archs)
        ratio = r.get("opencl_over_cpu")
        ratio = "—" if ratio is None or ratio != ratio else f"{ratio:.2f}"
        lines.append(f"| {r['op']} | {times} | {ratio} | {r['faster']} | {r['footprints']} | "
                     f"{r['nsample']} |")
    return "\n".join(lines)


def run(base: ExperimentSpec | None = None, schedulers=None, repeats: int = 3,
        ooc_fraction: float | None = 0.5, ooc_dir: str | None = None, cache_dir=None,
        isolate: bool = True, progress: bool = True, calibrate_steps: int = 3,
        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(summary, every point's row)``; see ``summarize`` and ``sweep.run``. On OpenCL
    workers ``calibrate_steps`` steps calibrate the models first (0: none); what they
    learned is ``df.attrs["perfmodels"]`` (``perfmodels.entries``)."""
    base = base or default_base()
    entries = calibrate(base, calibrate_steps) if base.nopencl and calibrate_steps else None
    df = sweep_run(points(base, schedulers, repeats, ooc_fraction, ooc_dir), cache_dir,
                   isolate=isolate, progress=progress)
    models = None if entries is None else perfmodels.per_arch(entries)
    if entries is not None:
        df.attrs["perfmodels"] = entries
    return summarize(df, models), df


def write(summary: pd.DataFrame, df: pd.DataFrame, out, base: ExperimentSpec) -> dict:
    """schedulers.png, schedulers.md (the table), schedulers.json (record) in ``out``."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"png": out / "schedulers.png", "md": out / "schedulers.md",
             "json": out / "schedulers.json"}
    workers = f", {base.nopencl} OpenCL + {base.ncpu} CPU workers" if base.nopencl else ""
    title = (f"Schedulers and priorities: L{base.n_layer} E{base.n_embd} T{base.seq_len} "
             f"B{base.batch} V{base.vocab_size}{workers}")
    save_figure(figure(summary, title), paths["png"])
    md = table(summary) + "\n"
    entries = df.attrs.get("perfmodels")
    results = {"summary": summary.to_dict("records"), "points": df.to_dict("records")}
    if entries is not None:
        paths["perfmodels"] = out / "perfmodels.csv"
        atomic_write_bytes(paths["perfmodels"], entries.to_csv(index=False).encode())
        models = perfmodels.per_arch(entries)
        md += "\nWhat the performance models learned (mean task time per arch):\n\n"
        md += models_table(models) + "\n"
        results["perfmodels"] = models.to_dict("records")
    atomic_write_bytes(paths["md"], md.encode())
    save_record(paths["json"], "bench-schedulers", base, results)
    return paths
