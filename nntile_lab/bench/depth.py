"""Deep models as fast as shallow ones: throughput per FLOP of a deeper GPT-2 against a
shallower one, in memory and out of core (``nntile-lab bench depth``).

The paper saw its 8-layer models run slower per FLOP than its 4-layer ones once memory
was short. Here every (depth, mode) point runs ``repeats`` times, each in its own process
(the sweep engine), the depths interleaved within a repeat so that a slow minute of a
shared machine hits both; ratio = GFLOP/s of the deeper model / GFLOP/s of the shallower
one within a repeat, median and min–max over repeats. Out of core, each model gets a RAM
cap at ``ooc_fraction`` of its own planned peak (the same pressure relative to its size)
and a disk node, as in ``bench schedulers``.
"""
from __future__ import annotations

import pandas as pd

from nntile_lab.bench.schedulers import default_ooc_dir, out_of_core
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import run as sweep_run

IN_MEMORY, OUT_OF_CORE = "in memory", "out of core"


def points(base: ExperimentSpec, layers=(4, 8), repeats: int = 3,
           ooc_fraction: float | None = 0.5, ooc_dir: str | None = None) -> list:
    """Every point, repeat by repeat, the depths side by side."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be ≥ 1")
    layers = list(layers)
    if len(layers) != 2 or any(not isinstance(n, int) or n < 1 for n in layers) \
            or layers[0] >= layers[1]:
        raise ValueError(f"layers={layers!r} must be two depths, shallow first (e.g. 4,8)")
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


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, depth): median GFLOP/s, step time and idle share over repeats,
    the RAM cap; and per mode the deeper/shallower ratio (``ratio``, ``ratio_min``,
    ``ratio_max``) on the deeper model's row."""
    df = df.assign(mode=[_mode(c) for c in df["memory_limit_mb"]])
    rows = []
    for (mode, n), g in df.groupby(["mode", "n_layer"], sort=False):
        good = g[g["error"].isna() & g["gflops"].notna()]
        rows.append({"mode": mode, "n_layer": int(n), "repeats": len(good),
                     "memory_limit_mb": g["memory_limit_mb"].iloc[0],
                     "gflops": good["gflops"].median() if len(good) else None,
                     "step_ms": 1e3 * good["step_time_s"].median() if len(good) else None,
                     "idle": good["idle_share"].median() if len(good) else None,
                     "error": None if len(good) else g["error"].iloc[0]})
    out = pd.DataFrame(rows)
    for mode, g in df.groupby("mode", sort=False):
        depths = sorted(g["n_layer"].unique())
        per = g.pivot_table(index="seed", columns="n_layer", values="gflops")
        if len(depths) == 2 and set(depths) <= set(per.columns):
            r = (per[depths[1]] / per[depths[0]]).dropna()
            deep = (out["mode"] == mode) & (out["n_layer"] == depths[1])
            out.loc[deep, ["ratio", "ratio_min", "ratio_max"]] = (
                [r.median(), r.min(), r.max()] if len(r) else [None] * 3)
    return out


def table(summary: pd.DataFrame) -> str:
    lines = ["| mode | layers | RAM cap MiB | GFLOP/s (median) | step ms | idle | "
             "per-FLOP ratio to the shallower (min–max) |", "|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        cap = "—" if pd.isna(r.memory_limit_mb) else f"{int(r.memory_limit_mb)}"
        if r.error is not None:
            lines.append(f"| {r.mode} | {r.n_layer} | {cap} | failed: {r.error} | | | |")
            continue
        ratio = ("" if pd.isna(getattr(r, "ratio", float("nan"))) else
                 f"**{r.ratio:.3f}** ({r.ratio_min:.3f}–{r.ratio_max:.3f})")
        lines.append(f"| {r.mode} | {r.n_layer} | {cap} | {r.gflops:.1f} | {r.step_ms:.0f} | "
                     f"{r.idle:.1%} | {ratio} |")
    return "\n".join(lines)


def run(base: ExperimentSpec, layers=(4, 8), repeats: int = 3, ooc_fraction=0.5,
        ooc_dir=None, cache_dir=None, isolate: bool = True, progress: bool = True):
    """``(summary, every point's row)``."""
    df = sweep_run(points(base, layers, repeats, ooc_fraction, ooc_dir), cache_dir,
                   isolate=isolate, progress=progress, keep_traces=False)
    return summarize(df), df
