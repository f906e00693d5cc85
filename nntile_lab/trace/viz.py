"""Figures of a trace (matplotlib, no pyplot state: each function returns a Figure that
displays itself in Jupyter, interactive under ``%matplotlib widget``; ``fig.savefig(path)``
writes it).

``gantt(tr, window=None, step=None)``  one row per worker, one bar per task coloured by
                                       op, a figure legend of the ops shown;
                                       ``window=(t0, t1)`` in µs or ``step=k`` zooms in;
                                       the status line names the task under the cursor.
``op_colors(names)``  one colour per op: an op family (matmul, attention, layer norm, …)
                      shares a hue, its members differ in shade.
``utilisation(tr)``   busy workers over time, and per worker executing / sleeping /
                      overhead time (StarPU's counters).
``memory(tr)``        bytes per memory node over time; by category (parameters,
                      gradients, optimizer state, activations) once
                      ``tr.memory_by_category(model, optimizer)`` was called.
``transfers(tr)``     bytes moved per bus (RAM ↔ disk, …) and bytes accessed per op.
``nodes(tr)``         the memory timeline per node (RAM, each device, the disk node),
                      each against its cap, and the bytes and transfers per bus
                      (RAM → device, device → RAM, …): the accelerator's memory at work.
``op_time(tr)``       time per op (sum of task durations), with task counts.
``throughput(tr)``    GFLOP/s and tokens/s per marked step.
``save_all(tr, directory)`` writes all of them as PNGs and returns their paths.
"""
from __future__ import annotations

import colorsys
import os
import re

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch

from nntile_lab.jupyter_figure import WIDTH, Figure, save_figure
from nntile_lab.trace import metrics
from nntile_lab.trace.tables import REGISTERED_NODE, node_kind, node_timeline

MiB = float(1 << 20)


# op families, first match wins (prefixes of the codelet names); each family one hue
FAMILIES = (
    ("matmul", r"gemm", "#1f77b4"),
    ("attention", r"softmax|mask_causal", "#ff7f0e"),
    ("layer norm", r"layer_norm", "#2ca02c"),
    ("loss", r"cross_entropy", "#d62728"),
    ("optimizer", r"adamw|sgd", "#9467bd"),
    ("embedding", r"embedding", "#8c564b"),
    ("activation", r"gelu", "#e377c2"),
    ("reduction", r"(sum|sumsq|sumprod|max)_", "#bcbd22"),
    ("broadcast", r"(add|mul)_(slice|fiber)", "#17becf"),
    ("layout", r"permute|transpose", "#393b79"),
    ("elementwise", r"fill|copy|axpby|scale|mul", "#7f7f7f"),
)
OTHER = ("other", "", "#4a4a4a")


def op_family(name: str) -> str:
    return _family(name)[0]


def _family(name: str):
    return next((f for f in FAMILIES if re.match(f[1], name)), OTHER)


def legend_order(name: str) -> tuple:
    """Ops in a legend: by family (in FAMILIES' order), then by name."""
    fam = _family(name)
    return (FAMILIES.index(fam) if fam in FAMILIES else len(FAMILIES), name)


def op_colors(names) -> dict:
    """One colour per op name: the ops of a family share its hue and differ in lightness
    (sorted by name, darkest first), so no two ops of ``names`` share a colour and every
    figure of the same trace agrees."""
    members: dict[tuple, list[str]] = {}
    for n in sorted(set(names)):
        members.setdefault(_family(n), []).append(n)
    colors = {}
    for (_, _, base), ops in members.items():
        h, light, sat = colorsys.rgb_to_hls(*to_rgb(base))
        if len(ops) == 1:
            shades = [light]
        else:   # an even spread around the base lightness, kept off black and white
            lo, hi = max(0.22, light - 0.25), min(0.82, light + 0.3)
            shades = [lo + (hi - lo) * i / (len(ops) - 1) for i in range(len(ops))]
        for n, li in zip(ops, shades):
            colors[n] = colorsys.hls_to_rgb(h, li, sat)
    return colors


def gantt(tr, window: tuple[float, float] | None = None, step: int | None = None, *,
          title: str | None = None, colors: dict | None = None) -> Figure:
    """Tasks per worker over time. ``title`` names the slice shown (default: the window,
    step or "whole trace"); ``colors`` the op colours of a larger trace this one is a slice
    of (so that a slice keeps its ops' colours)."""
    t = tr.tasks
    if step is not None:
        window = _step_window(tr, step)
    if window is not None:
        t = t[(t["end_us"] > window[0]) & (t["start_us"] < window[1])]
    workers = sorted(set(tr.tasks["worker"]))
    colors = colors or op_colors(tr.tasks["name"])
    shown = sorted(set(t["name"]), key=legend_order)
    ncol = min(4, max(len(shown), 1))     # the longest op names, 4 across WIDTH
    legend_rows = -(-len(shown) // ncol)
    fig = Figure(figsize=(WIDTH, 1.6 + 0.6 * max(len(workers), 1) + 0.25 * legend_rows),
                 layout="constrained")
    ax = fig.add_subplot()
    for (w, name), mine in t.groupby(["worker", "name"]):
        bars = ax.broken_barh(list(zip(mine["start_us"] / 1e3, mine["duration_us"] / 1e3)),
                              (workers.index(w) - 0.4, 0.8), facecolors=colors[name])
        bars.set_gid(f"gantt:{w}:{name}")
    fig.legend(handles=[Patch(color=colors[n], label=n) for n in shown], ncol=ncol,
               loc="outside lower center", fontsize="small")
    names = dict(zip(tr.tasks["worker"], tr.tasks["worker_name"]))
    ax.set_yticks(range(len(workers)), [names[w] for w in workers])
    rows = (len(workers) - 0.4, -0.6)               # worker 0 on top
    ax.set_ylim(*rows)
    # zooming changes the time range only: a rectangle never loses a worker's row
    ax.callbacks.connect("ylim_changed",
                         lambda a: a.get_ylim() != rows and a.set_ylim(*rows))
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("worker")
    if window is not None:
        ax.set_xlim(window[0] / 1e3, window[1] / 1e3)
    elif len(t):     # the tasks' own span: no margin before the first (a negative time)
        ax.set_xlim(t["start_us"].min() / 1e3, t["end_us"].max() / 1e3)
    if title is None:
        title = f"step {step}" if step is not None else (
            f"{window[0] / 1e3:.1f}–{window[1] / 1e3:.1f} ms" if window else "whole trace")
    ax.set_title(f"Tasks per worker, {title} ({len(t)} tasks)")
    ax.format_coord = TaskAt(tr, t, workers)
    return fig


class TaskAt:
    """``ax.format_coord`` of a Gantt chart: the task under the cursor (op, worker, layer,
    phase, duration, tiles), which an interactive backend shows as the cursor moves."""

    def __init__(self, tr, tasks, workers):
        tiles = (tr.accesses.groupby("task_id").size() if len(tr.accesses)
                 else None)
        self.rows = []
        for w in workers:
            mine = tasks[tasks["worker"] == w].sort_values("start_us")
            self.rows.append((mine["start_us"].to_numpy() / 1e3,
                              mine["end_us"].to_numpy() / 1e3, mine))
        self.tiles = tiles

    def __call__(self, x: float, y: float) -> str:
        k = int(round(y))
        at = f"t={x:.3f} ms"
        if not 0 <= k < len(self.rows):
            return at
        starts, ends, mine = self.rows[k]
        i = int(np.searchsorted(starts, x, side="right")) - 1
        if i < 0 or x > ends[i]:
            return f"{at}, {mine['worker_name'].iloc[0] if len(mine) else 'worker'} idle"
        return f"{at}: {describe_task(mine.iloc[i], self.tiles)}"


def describe_task(task, tiles=None) -> str:
    """One line about a task: op, worker, layer, phase, duration, tiles and bytes."""
    layer = task["layer"]
    parts = [str(task["name"]), str(task["worker_name"]),
             "outside the blocks" if layer is None or layer != layer or layer < 0
             else f"layer {int(layer)}",
             str(task["phase"]) if task["phase"] == task["phase"] and task["phase"] else
             "no phase",
             f"{task['duration_us'] / 1e3:.3g} ms"]
    if tiles is not None and task["task_id"] in tiles.index:
        parts.append(f"{int(tiles[task['task_id']])} tiles, "
                     f"{task['bytes'] / MiB:.3g} MiB")
    return " · ".join(parts)


def utilisation(tr, bins: int = 200) -> Figure:
    fig = Figure(figsize=(WIDTH, 6), layout="constrained")
    ax, bx = fig.subplots(2, 1)
    nw = max(len(tr.workers), tr.tasks["worker"].nunique(), 1)
    if len(tr.tasks):
        edges, busy = metrics.busy_over_time(tr, bins)
        ax.stairs(100 * busy / nw, edges / 1e3, fill=True, alpha=0.7, label="busy")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("workers busy (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Utilisation over time ({nw} workers)")
    if len(tr.workers):
        w = tr.workers
        x = np.arange(len(w))
        bottom = np.zeros(len(w))
        for col, label in (("executing_us", "executing"), ("overhead_us", "overhead"),
                           ("sleeping_us", "sleeping")):
            bx.bar(x, w[col] / 1e3, bottom=bottom, label=label)
            bottom += w[col].to_numpy() / 1e3
        bx.set_xticks(x, w["name"])
        bx.legend(fontsize="small")
    else:
        u = metrics.utilisation(tr)
        bx.bar(u["worker"].astype(str), u["busy_us"] / 1e3, label="executing")
    bx.set_xlabel("worker")
    bx.set_ylabel("time (ms)")
    bx.set_title("Per worker: executing / overhead / sleeping")
    return fig


def memory(tr) -> Figure:
    """Memory per node over time, and what the nodes hold by category (parameters,
    gradients, optimizer state, and the rest: activations and temporaries). The stack
    sums every node (``Trace.category_timeline``): under a RAM cap with a disk node it
    rises above the cap, and what rises above RAM's own line is on the disk node (a tile
    written out and still in RAM counts on both) — the RAM cap and what RAM held are
    drawn over the stack so that it reads so."""
    fig = Figure(figsize=(WIDTH, 6.5), layout="constrained")
    ax, bx = fig.subplots(2, 1, sharex=True)
    m = tr.memory
    for (node, name), rows in m.groupby(["node", "name"]):
        ax.plot(rows["t_us"] / 1e3, rows["used_bytes"] / MiB, label=name, drawstyle="steps-post",
                ls="--" if node == REGISTERED_NODE else "-")
    ax.set_ylabel("used (MiB)")
    ax.set_title("Memory per node (StarPU's accounting, its cached free buffers included; "
                 "dashed: tiles registered)")
    ram_name, cap = _ram_cap(tr)
    if cap is not None:
        ax.axhline(cap / MiB, color="k", ls=":", lw=1, label=f"RAM cap {cap / MiB:.0f} MiB")
    if len(m):
        ax.legend(fontsize="small")
    cat = tr.category_timeline()
    if len(cat):
        names = [c for c in cat.columns if c != "t_us"]
        bx.stackplot(cat["t_us"] / 1e3, *[cat[c] / MiB for c in names],
                     labels=[CATEGORY_LABELS.get(n, n) for n in names], step="post")
        title = "Memory by category (what every node holds)"
        if cap is not None:
            ram = m[m["name"] == ram_name]
            bx.plot(ram["t_us"] / 1e3, ram["used_bytes"] / MiB, color="k", lw=1,
                    drawstyle="steps-post", label=f"of which in RAM ({ram_name})")
            bx.axhline(cap / MiB, color="k", ls=":", lw=1, label=f"RAM cap {cap / MiB:.0f} MiB")
            if _has_disk(tr):
                # the stack sums RAM and the disk node (used_over_time): a tile written
                # out and still in RAM counts on both
                title = ("Memory by category, RAM and disk node together: above the "
                         "RAM line it is on disk")
        bx.legend(fontsize="small", loc="upper left")
        bx.set_title(title)
    else:
        bx.text(0.5, 0.5, "no categories: call tr.memory_by_category(model, optimizer)",
                ha="center", va="center", transform=bx.transAxes)
        bx.set_title("Memory by category")
    bx.set_xlabel("time (ms)")
    bx.set_ylabel("used (MiB)")
    return fig


# the trace's residual category: everything held beyond parameters, gradients and state
CATEGORY_LABELS = {"activations": "activations and temporaries"}


def _ram_cap(tr) -> tuple[str | None, float | None]:
    """(the RAM node's name, its cap in bytes) when the runtime capped RAM, else (name or
    None, None)."""
    nodes = metrics.memory_per_node(tr)
    ram = nodes[nodes["kind"] == "RAM"]
    if not len(ram):
        return None, None
    r = ram.iloc[0]
    capped = bool(r["capped"]) and r["capacity_bytes"] == r["capacity_bytes"]
    return r["name"], (float(r["capacity_bytes"]) if capped else None)


def _has_disk(tr) -> bool:
    return bool((metrics.memory_per_node(tr)["kind"] == "disk").any())


def transfers(tr) -> Figure:
    fig = Figure(figsize=(WIDTH, 6), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    b = tr.buses
    moved = b[b["bytes"] > 0] if len(b) else b
    if len(moved):
        ax.bar([f"{s}→{d}" for s, d in zip(moved["src"], moved["dst"])], moved["bytes"] / MiB)
    else:
        ax.text(0.5, 0.5, "no data moved between memory nodes\n(one RAM node, no disk node)",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("bus")
    ax.set_ylabel("moved (MiB)")
    ax.set_title("Transfers per bus")
    per_op = tr.tasks.groupby("name")["bytes"].sum().sort_values()
    bx.barh(per_op.index, per_op.to_numpy() / MiB,
            color=[op_colors(tr.tasks["name"])[n] for n in per_op.index])
    bx.set_xlabel("bytes accessed by its tasks (MiB)")
    bx.set_ylabel("op")
    bx.set_title("Data touched per op")
    return fig


def nodes(tr) -> Figure:
    timeline = node_timeline(tr.memory)
    buses = metrics.transfers_per_bus(tr)
    caps = metrics.memory_per_node(tr).set_index("name")
    n = max(len(timeline.columns), 1)
    fig = Figure(figsize=(WIDTH, 2.2 * n + 3), layout="constrained")
    axes = fig.subplots(n + 1, 1, height_ratios=[2] * n + [2.4])
    for ax, name in zip(axes[:-1], timeline.columns):
        used = timeline[name].dropna()
        ax.plot(used.index / 1e3, used.to_numpy() / MiB, drawstyle="steps-post", label="held")
        cap = caps.loc[name] if name in caps.index else None
        if cap is not None and cap["capped"] and cap["capacity_bytes"] == cap["capacity_bytes"]:
            ax.axhline(cap["capacity_bytes"] / MiB, color="tab:red", ls="--",
                       label=f"cap {cap['capacity_bytes'] / MiB:.0f} MiB")
        ax.set_ylim(bottom=0)
        ax.set_ylabel("MiB")
        ax.set_title(f"{name} ({node_kind(name)}): what StarPU holds there")
        ax.legend(fontsize="small", loc="lower right")
    if timeline.empty:
        axes[0].text(0.5, 0.5, "no memory samples", ha="center", va="center",
                     transform=axes[0].transAxes)
    axes[-2].set_xlabel("time (ms)")
    bx = axes[-1]
    if len(buses):
        labels = [f"{s} → {d}" for s, d in zip(buses["src"], buses["dst"])]
        bars = bx.barh(labels, buses["bytes"] / MiB, color=[
            _DIRECTION_COLORS.get(d, "tab:gray") for d in buses["direction"]])
        bx.bar_label(bars, labels=[f"{b / MiB:.0f} MiB in {t} transfers"
                                   for b, t in zip(buses["bytes"], buses["transfers"])],
                     fontsize="small")
        bx.margins(x=0.35)
        bx.invert_yaxis()
    else:
        bx.text(0.5, 0.5, "no data moved between memory nodes", ha="center", va="center",
                transform=bx.transAxes)
    bx.set_xlabel("moved (MiB)")
    bx.set_title("Transfers per bus (each direction between two memory nodes)")
    return fig


_DIRECTION_COLORS = {"RAM → device": "tab:blue", "device → RAM": "tab:orange",
                     "RAM → disk": "tab:green", "disk → RAM": "tab:olive"}


def op_time(tr) -> Figure:
    ops = metrics.op_times(tr).iloc[::-1]
    fig = Figure(figsize=(WIDTH, 1.5 + 0.35 * max(len(ops), 1)), layout="constrained")
    ax = fig.add_subplot()
    colors = op_colors(tr.tasks["name"])
    bars = ax.barh(ops["name"], ops["total_us"] / 1e3, color=[colors[n] for n in ops["name"]])
    ax.bar_label(bars, labels=[f"{n} tasks" + (f", {g:.1f} GFLOP/s" if g == g and g > 0 else "")
                               for n, g in zip(ops["tasks"], ops["gflops"])], fontsize="small")
    ax.margins(x=0.3)
    ax.set_xlabel("time in tasks (ms, summed over workers)")
    ax.set_ylabel("op")
    ax.set_title("Time per op")
    return fig


def throughput(tr) -> Figure:
    fig = Figure(figsize=(WIDTH, 4), layout="constrained")
    ax = fig.add_subplot()
    s = tr.steps
    if len(s):
        ax.bar(s["step"], s["gflops"], color="tab:blue", label="GFLOP/s")
        ax.set_xticks(s["step"])
        if s["tokens_per_s"].notna().any():
            tx = ax.twinx()
            tx.plot(s["step"], s["tokens_per_s"], "o-", color="tab:orange", label="tokens/s")
            tx.set_ylabel("tokens/s")
            tx.legend(loc="upper right")
    else:
        ax.bar([0], [metrics.gflops(tr)], color="tab:blue", label="GFLOP/s")
        ax.set_xticks([0], ["whole trace"])
    ax.set_xlabel("step")
    ax.set_ylabel("GFLOP/s")
    ax.legend(loc="upper left")
    ax.set_title("Throughput per step")
    return fig


FIGURES = {"gantt": gantt, "utilisation": utilisation, "memory": memory,
           "transfers": transfers, "nodes": nodes, "op_time": op_time,
           "throughput": throughput}


def save_all(tr, directory: str, step: int | None = None, dpi: int = 110) -> dict[str, str]:
    """Every figure as ``<name>.png``, plus ``gantt_step.png`` zoomed on ``step`` (default:
    the last marked step) when steps were marked."""
    os.makedirs(directory, exist_ok=True)
    figs = {name: fn(tr) for name, fn in FIGURES.items()}
    if len(tr.steps):
        figs["gantt_step"] = gantt(tr, step=int(tr.steps["step"].iloc[-1]) if step is None
                                   else step)
    paths = {}
    for name, fig in figs.items():
        paths[name] = str(save_figure(fig, os.path.join(directory, f"{name}.png"), dpi=dpi))
    return paths


def _step_window(tr, step: int) -> tuple[float, float]:
    s = tr.steps
    if not len(s) or step not in set(s["step"]):
        raise ValueError(f"step={step} was not marked in this trace (marked steps: "
                         f"{list(s['step']) if len(s) else 'none'}; call tr.mark_step() at "
                         "the end of each step)")
    row = s[s["step"] == step].iloc[0]
    return float(row["start_us"]), float(row["end_us"])
