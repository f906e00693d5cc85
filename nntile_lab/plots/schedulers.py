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
            ax.set_xticks(range(len(scheds)), scheds, rotation=30, ha="right")
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
    """Share of tasks and of kernel time on the OpenCL device per scheduler, priorities
    off/on; ◆ the share of tasks on the arch the models call faster."""
    for k, prio in enumerate((False, True)):
        color = "tab:orange" if prio else "tab:blue"
        for i, sched in enumerate(scheds):
            r = s[(s["scheduler"] == sched) & (s["priorities"] == prio)]
            if not len(r) or r.iloc[0].get("error") or pd.isna(r.iloc[0].get("step_ms")):
                continue
            r = r.iloc[0]
            x = i + (k - 0.5) * 0.4
            share, time_share = r.get("opencl_task_share"), r.get("opencl_time_share")
            if share is not None and share == share:
                ax.bar(x, 100 * share, width=0.4, color=color,
                       label=f"tasks, priorities {'on' if prio else 'off'}" if i == 0 else None)
            if time_share is not None and time_share == time_share:
                ax.plot(x, 100 * time_share, "_", color="black", ms=14, mew=2,
                        label="kernel time" if i == 0 and not k else None)
            on_faster = r.get("on_faster")
            if on_faster is not None and on_faster == on_faster:
                ax.plot(x, 100 * on_faster, "D", color="crimson", ms=5,
                        label="tasks on the faster arch (models)" if i == 0 and not k else None)
    ax.set_xticks(range(len(scheds)), scheds, rotation=30, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("placement: share on OpenCL, %")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="x-small")
