"""``bench schedulers``' figures: step time and idle share per scheduler, priorities off and
on, per memory mode; on OpenCL workers, where the tasks ran. Drawn from the summary table
(``bench.schedulers.summarize``: one row per cell of the points' records)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from nntile_lab.jupyter_figure import Figure

IN_MEMORY = "in memory"


def is_placed(summary: pd.DataFrame) -> bool:
    """Whether the rows carry placement (a run on OpenCL workers)."""
    return "opencl_task_share" in summary and summary["opencl_task_share"].notna().any()


def figure(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Per memory mode: step time per scheduler, priorities off and on side by side (bars:
    median over repeats, whiskers min–max), and the idle share under it; × = failed."""
    modes = list(dict.fromkeys(summary["mode"])) or [IN_MEMORY]
    placed = is_placed(summary)
    nrows = 3 if placed else 2
    fig = Figure(figsize=(max(5.5 * len(modes), 8.0), 3.25 * nrows), layout="constrained")
    axes = fig.subplots(nrows, len(modes), squeeze=False)
    for j, mode in enumerate(modes):
        s = summary[summary["mode"] == mode]
        scheds = list(dict.fromkeys(s["scheduler"]))
        top, bottom = axes[0][j], axes[1][j]
        if placed:
            _placement_axes(axes[2][j], s, scheds)
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
            _scheduler_ticks(ax, scheds)
            ax.grid(axis="y", alpha=0.3)
        top.set_title(mode)
        top.set_ylabel("step time, ms (median of repeats; min–max)")
        bottom.set_ylabel("idle share of worker time, %")
        top.legend(fontsize="small")
    fig.suptitle(title or "Schedulers and priorities")
    return fig


def placement_figure(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """The placement row of ``figure`` alone, one panel per memory mode (the scheduler
    sweep widget shows it under its bars on OpenCL workers)."""
    modes = list(dict.fromkeys(summary["mode"])) or [IN_MEMORY]
    fig = Figure(figsize=(max(5.5 * len(modes), 8.0), 3.6), layout="constrained")
    for ax, mode in zip(fig.subplots(1, len(modes), squeeze=False)[0], modes):
        s = summary[summary["mode"] == mode]
        _placement_axes(ax, s, list(dict.fromkeys(s["scheduler"])))
        ax.set_title(mode)
    fig.suptitle(title or "Where the tasks ran")
    return fig


def _placement_axes(ax, s: pd.DataFrame, scheds: list[str]) -> None:
    """Per scheduler, priorities off and on side by side: bars, the share of tasks on the
    OpenCL device; — the share of kernel time there; ◆ the share of the tasks of ops both
    kinds can run that ran on the kind the models call faster. One series each, every one
    in the legend (below the axes: it never hides a bar)."""
    series = {"time": ([], []), "faster": ([], [])}
    for k, prio in enumerate((False, True)):
        xs, shares = [], []
        for i, sched in enumerate(scheds):
            r = s[(s["scheduler"] == sched) & (s["priorities"] == prio)]
            if not len(r) or r.iloc[0].get("error") or pd.isna(r.iloc[0].get("step_ms")):
                continue
            r, x = r.iloc[0], i + (k - 0.5) * 0.4
            for key, col in (("time", "opencl_time_share"), ("faster", "on_faster")):
                v = r.get(col)
                if v is not None and v == v:
                    series[key][0].append(x)
                    series[key][1].append(100 * v)
            share = r.get("opencl_task_share")
            if share is not None and share == share:
                xs.append(x)
                shares.append(100 * share)
        ax.bar(xs, shares, width=0.4, color="tab:orange" if prio else "tab:blue",
               label=f"tasks on OpenCL, priorities {'on' if prio else 'off'}")
    if series["time"][0]:
        ax.plot(*series["time"], "_", color="black", ms=14, mew=2, linestyle="none",
                label="kernel time on OpenCL")
    if series["faster"][0]:
        ax.plot(*series["faster"], "D", color="crimson", ms=5, linestyle="none",
                label="tasks on the faster kind (models; ops both kinds run)")
    slant = _scheduler_ticks(ax, scheds)
    ax.set_ylim(0, 105)
    ax.set_ylabel("where the tasks ran: share, %")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.22 if slant else -0.1))


def _scheduler_ticks(ax, scheds: list[str]) -> bool:
    """One tick per scheduler, under the middle of its pair of bars: long lists slanted,
    each name ending at its tick (``rotation_mode="anchor"``; a slanted right-aligned
    label otherwise sits left of its bars). Whether slanted."""
    slant = len(scheds) > 5
    ax.set_xticks(range(len(scheds)), scheds, rotation=30 if slant else 0,
                  ha="right" if slant else "center", rotation_mode="anchor")
    return slant
