"""Deep models as fast as shallow ones: throughput per FLOP of deeper GPT-2s against the
shallowest, in memory and out of core (``nntile-lab bench depth``).

The paper saw deep models run slower per FLOP ("training standard pretrained GPT2 models did
not scale"). Here every (depth, mode) point runs ``repeats`` times, each in its own process
(the sweep engine), the depths interleaved within a repeat so that a slow minute of a shared
machine hits all of them; ratio = GFLOP/s of a depth / GFLOP/s of the shallowest within a
repeat, median and min–max over repeats. Out of core, each model gets a RAM cap at
``ooc_fraction`` of its own planned peak (the same pressure relative to its size) and a
disk node, as in ``bench schedulers``.

Per depth, from each point's trace (``sweep.measure``): the idle share of worker time, the
critical path (the longest chain of dependent tasks, measured durations) per step and as a
share of the step, the runtime's overhead, the share of the step both workers waited for
Python, and the tasks per step — the numbers that say *why* a depth loses throughput.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nntile_lab.bench.schedulers import check_ooc_on_opencl, default_ooc_dir, out_of_core
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import save_record
from nntile_lab.jupyter_figure import save_figure
from nntile_lab.plots.depth import IN_MEMORY, OUT_OF_CORE, figure
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import run as sweep_run

# GPT-2's own depths (small, medium, large; XL's 48 where RAM allows) and width
LAYERS = (4, 12, 24, 36)
# The model of the default run: GPT-2 small's width and heads, a step of 1024 tokens (two
# token tiles: two chains in every product that accumulates over tokens), one warm-up and
# two measured steps — sized for a 2-core machine (docs/benchmarks.md says what it costs)
# a 36-layer point out of core takes minutes on a shared 2-core machine: each point may run
# this long before it becomes a row with a timeout error
POINT_TIMEOUT_S = 3600.0
BASE = {"n_embd": 768, "n_head": 12, "seq_len": 256, "batch": 4, "measure_steps": 2}
# per point: the sweep's numbers this table reads (median over repeats)
PER_POINT = {"step_ms": "step_time_s", "idle": "idle_share", "critical_path_ms":
             "critical_path_s", "critical_path_share": "critical_path_ratio",
             "overhead": "overhead_share", "python_wait": "both_idle_submission_share",
             "tasks_per_step": "tasks_per_step", "peak_rss_mb": "peak_rss_mb"}


def default_base() -> ExperimentSpec:
    """GPT-2 small's width (n_embd 768, 12 heads), T 256, B 4, 2 measured steps."""
    return ExperimentSpec(**BASE)


def check_layers(layers) -> list[int]:
    """``layers`` as a list: at least two depths ≥ 1, increasing (the first is the
    reference every ratio divides by)."""
    layers = list(layers)
    if (len(layers) < 2 or any(not isinstance(n, int) or isinstance(n, bool) or n < 1
                               for n in layers)
            or any(a >= b for a, b in zip(layers, layers[1:]))):
        raise ValueError(f"layers={layers!r} must be two or more depths ≥ 1, increasing, "
                         "shallowest first (e.g. 4,12,24,36)")
    return layers


def points(base: ExperimentSpec, layers=LAYERS, repeats: int = 3,
           ooc_fraction: float | None = 0.5, ooc_dir: str | None = None) -> list:
    """Every point, repeat by repeat, the depths side by side."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be ≥ 1")
    layers = check_layers(layers)
    check_ooc_on_opencl(base, ooc_fraction)
    out = []
    for r in range(repeats):
        for n in layers:
            spec = base.replace(n_layer=n, memory_limit_mb=None, ooc_dir=None,
                                seed=base.seed + r)
            out.append(spec)
            if ooc_fraction:
                out.append(out_of_core(spec, ooc_fraction, ooc_dir or default_ooc_dir()))
    return out


def _mode(cap) -> str:
    return IN_MEMORY if cap is None or pd.isna(cap) else OUT_OF_CORE


def _median(g: pd.DataFrame, col: str):
    if col not in g:
        return None
    v = pd.to_numeric(g[col], errors="coerce").dropna()
    return float(v.median()) if len(v) else None


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, depth), depths in order: median GFLOP/s, step time, idle share,
    critical path (ms per step and share of the step), overhead, Python wait and tasks per
    step over repeats, the RAM cap; and ``ratio``, ``ratio_min``, ``ratio_max``: GFLOP/s
    over the shallowest depth's in the same repeat (NaN on the shallowest's row)."""
    df = df.assign(mode=[_mode(c) for c in df["memory_limit_mb"]])
    rows = []
    for mode in dict.fromkeys(df["mode"]):
        for n in sorted(df.loc[df["mode"] == mode, "n_layer"].unique()):
            rows.append(_row(mode, int(n), df[(df["mode"] == mode) & (df["n_layer"] == n)]))
    out = pd.DataFrame(rows)
    out[["ratio", "ratio_min", "ratio_max"]] = np.nan
    for mode, g in df.groupby("mode", sort=False):
        ok = g[g["error"].isna() & g["gflops"].notna()]
        per = ok.pivot_table(index="seed", columns="n_layer", values="gflops")
        depths = sorted(g["n_layer"].unique())
        if depths[0] not in per.columns:
            continue                    # the reference failed: no ratio to give
        for n in depths[1:]:
            if n not in per.columns:
                continue
            r = (per[n] / per[depths[0]]).dropna()
            if len(r):
                at = (out["mode"] == mode) & (out["n_layer"] == n)
                out.loc[at, ["ratio", "ratio_min", "ratio_max"]] = [r.median(), r.min(),
                                                                    r.max()]
    return out


def _row(mode: str, n: int, g: pd.DataFrame) -> dict:
    good = g[g["error"].isna() & g["gflops"].notna()]
    row = {"mode": mode, "n_layer": n, "repeats": len(good),
           "memory_limit_mb": g["memory_limit_mb"].iloc[0],
           "gflops": _median(good, "gflops") if len(good) else None,
           "error": None if len(good) else g["error"].iloc[0]}
    for name, col in PER_POINT.items():
        row[name] = _median(good, col) if len(good) else None
    for name in ("step_ms", "critical_path_ms"):
        if row[name] is not None:
            row[name] *= 1e3
    return row


def phases(df: pd.DataFrame) -> pd.DataFrame:
    """From the points' saved traces (``run(keep_traces=True)``): one row per (mode,
    depth), medians over repeats of ``trace.phases.phase_split`` — how much of the step
    the forward+backward, the gradient-norm tail and the optimizer take, and how busy
    the workers are in each; and ``trace.phases.op_mix``: task time by where the work is
    (the blocks' GEMMs and other kernels, the head's, the optimizer)."""
    # the traces' readers load the compiled extension: only where traces are kept
    from nntile_lab.trace.phases import op_mix, phase_split
    from nntile_lab.trace.recorder import Trace
    rows = []
    for _, r in df.iterrows():
        if r.get("error") is None and isinstance(r.get("trace_dir"), str):
            tr = Trace.load(r["trace_dir"])
            split = phase_split(tr)
            if split["steps"]:
                rows.append({"mode": _mode(r["memory_limit_mb"]),
                             "n_layer": int(r["n_layer"]), **split,
                             **op_mix(tr, int(r["n_layer"]))})
    if not rows:
        raise ValueError("no point has a saved trace: run with keep_traces=True "
                         "(nntile-lab bench depth --traces)")
    got = pd.DataFrame(rows)
    rank = {m: k for k, m in enumerate(dict.fromkeys(got["mode"]))}   # as in summarize
    got = got.groupby(["mode", "n_layer"], sort=False).median(numeric_only=True).reset_index()
    order = sorted(range(len(got)), key=lambda k: (rank[got["mode"][k]], got["n_layer"][k]))
    return got.iloc[order].reset_index(drop=True)


def phase_table(ph: pd.DataFrame) -> str:
    """``phases``' rows as markdown: ms, share of the step and utilisation per part."""
    lines = ["| mode | layers | step ms | forward+backward ms (share, busy) | gradient-norm "
             "tail ms (share, busy) | optimizer ms (share, busy) |", "|" + "---|" * 6]
    for r in ph.to_dict("records"):
        cells = [f"{r[f'{p}_ms']:.0f} ({_pct(r[f'{p}_share'])}, {_pct(r[f'{p}_utilisation'])})"
                 for p in ("fwd_bwd", "norm", "optimizer")]
        lines.append(f"| {r['mode']} | {r['n_layer']} | {r['step_ms']:.0f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def mix_table(ph: pd.DataFrame) -> str:
    """``phases``' op-mix columns as markdown: shares of task time, GEMM rates."""
    lines = ["| mode | layers | block GEMMs | block other | head GEMMs | head other | "
             "optimizer | other | GFLOP/s per worker: block / head GEMMs |", "|" + "---|" * 9]
    for r in ph.to_dict("records"):
        shares = " | ".join(_pct(r[f"{p}_task_share"]) for p in ("block_gemm", "block_other",
                                                              "head_gemm", "head_other",
                                                              "optimizer", "other"))
        rates = " / ".join("—" if r[f"{p}_gflops"] is None or pd.isna(r[f"{p}_gflops"])
                           else f"{r[f'{p}_gflops']:.1f}" for p in ("block_gemm", "head_gemm"))
        lines.append(f"| {r['mode']} | {r['n_layer']} | {shares} | {rates} |")
    return "\n".join(lines)


def _pct(v) -> str:
    return "—" if v is None or pd.isna(v) else f"{100 * v:.1f} %"


def table(summary: pd.DataFrame) -> str:
    """The markdown table (BENCHMARKS.md's is this)."""
    lines = ["| mode | layers | RAM cap MiB | GFLOP/s (median) | step ms | per-FLOP ratio to "
             "the shallowest (min–max) | idle | critical path ms (share of step) | overhead | "
             "Python wait | tasks/step |", "|" + "---|" * 11]
    for r in summary.itertuples():
        cap = "—" if pd.isna(r.memory_limit_mb) else f"{int(r.memory_limit_mb)}"
        if r.error is not None:
            lines.append(f"| {r.mode} | {r.n_layer} | {cap} | failed: {r.error} |" + " |" * 7)
            continue
        ratio = ("reference" if pd.isna(r.ratio) else
                 f"**{r.ratio:.3f}** ({r.ratio_min:.3f}–{r.ratio_max:.3f})")
        cp = ("—" if r.critical_path_ms is None or pd.isna(r.critical_path_ms) else
              f"{r.critical_path_ms:.0f} ({_pct(r.critical_path_share)})")
        tasks = "—" if pd.isna(r.tasks_per_step) else f"{r.tasks_per_step:.0f}"
        lines.append(f"| {r.mode} | {r.n_layer} | {cap} | {r.gflops:.1f} | {r.step_ms:.0f} | "
                     f"{ratio} | {_pct(r.idle)} | {cp} | {_pct(r.overhead)} | "
                     f"{_pct(r.python_wait)} | {tasks} |")
    return "\n".join(lines)


def write(summary: pd.DataFrame, df: pd.DataFrame, out, base: ExperimentSpec) -> dict:
    """depth.png, depth.md (the table) and depth.json (the record) in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"png": out / "depth.png", "md": out / "depth.md", "json": out / "depth.json"}
    title = (f"Depth: E{base.n_embd} H{base.n_head} T{base.seq_len} B{base.batch} "
             f"V{base.vocab_size}, {base.scheduler}")
    save_figure(figure(summary, title), paths["png"])
    atomic_write_bytes(paths["md"], (table(summary) + "\n").encode())
    save_record(paths["json"], "bench-depth", base, {"summary": summary.to_dict("records"),
                                                     "points": df.to_dict("records")})
    return paths


def run(base: ExperimentSpec | None = None, layers=LAYERS, repeats: int = 3,
        ooc_fraction=0.5, ooc_dir=None, cache_dir=None, isolate: bool = True,
        progress: bool = True, keep_traces: bool = False,
        timeout_s: float = POINT_TIMEOUT_S):
    """``(summary, every point's row)``; ``keep_traces``: each point's trace stays in the
    cache (its row's ``trace_dir``; ``phases`` reads them)."""
    base = base or default_base()
    df = sweep_run(points(base, layers, repeats, ooc_fraction, ooc_dir), cache_dir,
                   isolate=isolate, progress=progress, keep_traces=keep_traces,
                   timeout_s=timeout_s)
    return summarize(df), df
