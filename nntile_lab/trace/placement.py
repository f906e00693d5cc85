"""Where each op ran: the kind of worker (CPU core, OpenCL device, ...) of every task.

On unlike workers the scheduler decides, task by task, which kind runs what; these
tables show its decisions per op, read from a trace's ``tasks`` table alone (the
worker's name says its kind), so saved traces work without StarPU:

``arch_of(worker_name)``   "cpu", "opencl", "cuda" (StarPU's names: "CPU 0",
                           "OpenCL 0 (device)", "CUDA 0 (device)"), else "other".
``table(tr)``              one row per (op, arch): tasks, mean and total µs, GFLOP/s.
``counts(tr)``             op × arch task counts (0 where an op never ran there),
                           with a total row: what ``nntile-lab trace`` prints.
``report(tr)``             ``counts`` as aligned text.
``figure(tr)``             per op, its tasks split by arch, and its mean task time on
                           each arch (the placement against the speed each kind showed).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nntile_lab.jupyter_figure import WIDTH, Figure

ARCHS = ("cpu", "opencl", "cuda")
COLORS = {"cpu": "tab:blue", "opencl": "tab:orange", "cuda": "tab:green", "other": "tab:gray"}


def arch_of(worker_name: str) -> str:
    """The kind of worker a StarPU worker name says ("CPU 0" → "cpu")."""
    kind = str(worker_name).split(" ", 1)[0].lower()
    return kind if kind in ARCHS else "other"


def _tasks(tr) -> pd.DataFrame:
    t = tr.tasks if hasattr(tr, "tasks") else tr
    return t.assign(arch=[arch_of(n) for n in t["worker_name"]])


def _archs(present) -> list[str]:
    return [a for a in (*ARCHS, "other") if a in set(present)]


def table(tr) -> pd.DataFrame:
    """One row per (op, arch) that ran: tasks, mean_us, total_us, gflops (of its tasks'
    own durations), sorted by op then arch."""
    t = _tasks(tr)
    cols = ["op", "arch", "tasks", "mean_us", "total_us", "gflops"]
    if t.empty:
        return pd.DataFrame(columns=cols)
    g = t.groupby(["name", "arch"], sort=True)
    out = pd.DataFrame({"tasks": g.size(), "mean_us": g["duration_us"].mean(),
                        "total_us": g["duration_us"].sum(), "flops": g["flops"].sum()})
    out["gflops"] = np.where(out["total_us"] > 0, out["flops"] / out["total_us"] / 1e3, np.nan)
    out = out.reset_index().rename(columns={"name": "op"})
    return out[cols]


def counts(tr) -> pd.DataFrame:
    """Task counts, op × arch (columns: the archs that ran tasks), and a "total" row."""
    t = _tasks(tr)
    if t.empty:
        return pd.DataFrame()
    c = pd.crosstab(t["name"], t["arch"]).reindex(columns=_archs(t["arch"]), fill_value=0)
    c.loc["total"] = c.sum()
    c.index.name, c.columns.name = "op", None
    return c


def report(tr) -> str:
    """``counts`` as a plain-text table; one line when every task ran on one kind."""
    c = counts(tr)
    if c.empty:
        return "no tasks"
    if len(c.columns) == 1:
        return f"every task ran on {c.columns[0]} workers ({int(c.loc['total'].iloc[0])} tasks)"
    return "where each op ran (tasks per kind of worker):\n" + c.to_string()


def figure(tr, title: str | None = None) -> Figure:
    """Left: each op's tasks per arch (stacked); right: its mean task time per arch."""
    tab = table(tr)
    ops = sorted(set(tab["op"]), reverse=True)
    archs = _archs(tab["arch"])
    fig = Figure(figsize=(WIDTH, 1.6 + 0.32 * max(len(ops), 1)), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(ops))
    base = np.zeros(len(ops))
    height = 0.8 / max(len(archs), 1)
    for k, arch in enumerate(archs):
        rows = tab[tab["arch"] == arch].set_index("op").reindex(ops)
        n = rows["tasks"].fillna(0).to_numpy()
        left.barh(y, n, left=base, color=COLORS[arch], label=arch)
        base += n
        right.barh(y - 0.4 + height * (k + 0.5), rows["mean_us"].to_numpy(),   # NaN: none
                   height=height, color=COLORS[arch], label=arch)
    left.set_yticks(y, ops)
    left.set_xlabel("tasks")
    left.set_title("where each op ran")
    left.legend(fontsize="small", loc="lower right")
    right.set_xscale("log")
    right.set_xlabel("mean task time, µs (log)")
    right.set_title("how long its tasks took there")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig
