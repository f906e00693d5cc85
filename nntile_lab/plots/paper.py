"""The NNTile paper's figures at this machine's scale, drawn from the points table alone
(``figures.records.points_frame``: one row per record).

The axes follow the paper's: model size on a categorical x axis, throughput as grouped bars,
a run that did not fit as 0 (marked ×, as the paper's missing bars are), a run that failed
for another reason as no bar with a red "failed" and its reason. ``series`` is the figures'
ordered table of series (``figures.family.SYSTEMS``: id → label); the table's ``nntile``
and ``failed`` columns say which series is nntile_lab's and which points failed for another
reason than memory.
"""
from __future__ import annotations

import pandas as pd

from nntile_lab.jupyter_figure import Figure
from nntile_lab.plots.common import grouped_bars, size_label

COLORS = {"nntile_lab": "#1f77b4", "torch_fp32": "#ff7f0e", "torch_bf16": "#2ca02c",
          "nntile_lab_bf16": "#9467bd", "nntile_lab_device": "#8c564b",
          "NNTile tf32": "#1f77b4", "PyTorch FSDP tf32": "#ff7f0e",
          "PyTorch FSDP bf16": "#2ca02c"}
# memory by category: the static three and the rest; an out-of-core run holds part of the
# first three on disk: its bar is what it held in RAM
CATEGORIES = ("parameters", "gradients", "optimizer state", "activations")
OOC_CATEGORY = "in RAM, rest on disk"
CATEGORY_LABELS = {"activations": "activations & temporaries"}
BARS = (*CATEGORIES, OOC_CATEGORY)
CATEGORY_COLORS = dict(zip(BARS, ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8c8c8c")))
# the label over each memory bar (nl = nntile_lab, pt = PyTorch; 16 = the bf16 series)
SHORT = {"nntile_lab": "nl", "torch_fp32": "pt", "nntile_lab_bf16": "nl16", "torch_bf16": "pt16"}


def throughput_table(df: pd.DataFrame, n_layer: int, series: dict) -> pd.DataFrame:
    """GFLOP/s by model size (rows, in size order) and system (columns, in ``series``'
    order); 0 = did not fit."""
    sub = df[df.n_layer == n_layer]
    t = sub.pivot_table(index="params", columns="system", values="gflops", aggfunc="first")
    t = t[[s for s in series if s in t.columns]].sort_index()
    t.index = [size_label(p) for p in t.index]
    t.index.name = "model size"
    return t


def size_axis(family: str) -> str:
    """The x axis' label: GPT-2's sizes are the paper's count, another model's all of its
    parameters."""
    return ("model size (parameters, 12·L·E² + V·E)" if family == "GPT-2"
            else f"model size (parameters of the {family}, embedding and head included)")


def throughput_figure(df: pd.DataFrame, n_layer: int, cap_mb: float, series: dict,
                      panel: str = "", family: str = "GPT-2", where: str = ""):
    """GFLOP/s by model size and series, the paper's panels (a)/(b); ``family`` names the
    model, ``where`` (a second title line) the CPU and precisions."""
    fig = Figure(figsize=(7, 3.8 + 0.2 * bool(where)))
    ax = fig.subplots()
    table = throughput_table(df, n_layer, series)
    grouped_bars(ax, table, "training GFLOP/s (model FLOPs)", colors=COLORS, labels=series)
    ooc = {size_label(p) for p in df[(df.n_layer == n_layer) & df.out_of_core
                                      & (df.status == "ok")].params}
    ax.set_xticklabels([f"{x}\nout of core" if x in ooc else x for x in table.index],
                       fontsize=8)
    ax.set_xlabel(size_axis(family))
    notes = mark_failed(ax, df[df.n_layer == n_layer], list(table.columns),
                        list(table.index), series)
    ax.set_title(f"{panel}{family} family, {n_layer} layers, under a {cap_mb:.0f} MiB cap "
                 "(× = did not fit" + ("; failed = an error, not memory" if notes else "")
                 + ")" + (f"\n{where}" if where else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.045 * notes, 1, 1))
    return fig


def mark_failed(ax, df: pd.DataFrame, systems: list, sizes: list, series: dict) -> bool:
    """A red "failed" where a point failed for another reason than memory, and the reasons
    under the axes (the first three; summary.md lists all): how many lines of reasons."""
    bad = df[df.failed]
    width = 0.8 / max(1, len(systems))
    for _, r in bad.iterrows():
        if r.system in systems and size_label(r.params) in sizes:
            x = sizes.index(size_label(r.params)) - 0.4 + width * (systems.index(r.system) + .5)
            ax.text(x, 0, "failed", rotation=90, color="red", ha="center", va="bottom",
                    fontsize=7, fontweight="bold")
    notes = [f"failed: {series.get(r.system, r.system)} {size_label(r.params)}: "
             f"{str(r.error)[:90]}" for _, r in bad.head(3).iterrows()]
    if len(bad) > 3:
        notes.append(f"… and {len(bad) - 3} more (summary.md)")
    if notes:
        ax.figure.text(0.01, 0.01, "\n".join(notes), fontsize=6, color="red", va="bottom")
    return len(notes)


def memory_table(df: pd.DataFrame, n_layer: int, series: dict) -> pd.DataFrame:
    """MiB by category for each (size, system); zeros where the run did not fit."""
    sub = df[(df.n_layer == n_layer) & df.system.isin(list(series))]
    cols = [f"{c}_mb" for c in BARS]
    t = sub.set_index(["params", "system"])[cols + ["status"]].sort_index()
    t.columns = [*BARS, "status"]
    return t


def memory_figure(df: pd.DataFrame, n_layer: int, cap_mb: float, series: dict,
                  panel: str = "", family: str = "GPT-2", where: str = ""):
    """Stacked bars by category, nntile_lab and PyTorch (each series) side by side for each
    size; ``family`` and ``where`` as in ``throughput_figure``."""
    t = memory_table(df, n_layer, series)
    sizes = sorted({p for p, _ in t.index})
    systems = [s for s in series if s in {s for _, s in t.index}]
    nntile = set(df[df.nntile].system)
    memory_failures = {(r.params, r.system) for r in df.itertuples()
                       if r.status != "ok" and not r.failed}
    fig = Figure(figsize=(9 + 1.5 * (len(systems) > 2), 3.8 + 0.2 * bool(where)))
    ax = fig.subplots()
    width = 0.8 / max(1, len(systems))
    for j, system in enumerate(systems):
        bottom = [0.0] * len(sizes)
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(sizes))]
        for c in BARS:
            if system not in nntile and c == OOC_CATEGORY:
                continue
            vals = [float(t.loc[(p, system), c]) if (p, system) in t.index else 0.0
                    for p in sizes]
            ax.bar(xs, vals, width, bottom=bottom, color=CATEGORY_COLORS[c],
                   edgecolor="white", linewidth=0.5,
                   label=(CATEGORY_LABELS.get(c, c) if j == 0 and (
                       c != OOC_CATEGORY or t[c].any()) else None),
                   hatch=None if system in nntile else "//")
            bottom = [b + v for b, v in zip(bottom, vals)]
        no_fit = [x for x, p in zip(xs, sizes) if (p, system) in memory_failures]
        ax.plot(no_fit, [0] * len(no_fit), "x", color="k", ms=7, mew=2, clip_on=False)
        for x, b in zip(xs, bottom):   # over a × (no bar) it clears the marker
            ax.annotate(SHORT.get(system, system), (x, b), xytext=(0, 1 if b else 6),
                        textcoords="offset points", ha="center", va="bottom",
                        fontsize=6 if len(systems) > 2 else 7)
    ax.axhline(cap_mb, color="k", ls="--", lw=1, label=f"cap {cap_mb:.0f} MiB")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([size_label(p) for p in sizes])
    ax.set_xlabel("model size (parameters); nl = nntile_lab, pt = PyTorch (hatched)"
                  + ("; 16 = bf16" if any(SHORT.get(s, "").endswith("16") for s in systems)
                     else " fp32"))
    ax.set_ylabel("peak MiB above start")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{panel}{family} family: memory by category, {n_layer} layers (× = did not "
                 "fit)" + (f"\n{where}" if where else ""), fontsize=10)
    fig.tight_layout()
    return fig


def reference_table(ref: pd.DataFrame, setup: str) -> pd.DataFrame:
    sub = ref[ref.setup == setup]
    t = sub.pivot_table(index="params_b", columns="series", values="tflops", aggfunc="first")
    order = ["NNTile tf32", "PyTorch FSDP tf32", "PyTorch FSDP bf16"]
    t = t[[s for s in order if s in t.columns]].sort_index()
    t.index = [f"{b:.1f}B" for b in t.index]
    t.index.name = "model size"
    return t


def reference_figure(ref: pd.DataFrame, setups: dict):
    """The paper's own points (NNTile vs PyTorch FSDP on A100s; ``setups``: id → title),
    same axes style."""
    fig = Figure(figsize=(11, 3.2 * len(setups)))
    axes = fig.subplots(len(setups), 1)
    for ax, (setup, title) in zip(axes, setups.items()):
        grouped_bars(ax, reference_table(ref, setup), "Tflops/s", colors=COLORS)
        ax.set_title(f"the paper: {title} (× = out of memory; blank = value not stated)",
                     fontsize=10)
        ax.tick_params(axis="x", labelsize=7)
    axes[-1].set_xlabel("model size (parameters)")
    fig.tight_layout()
    return fig


def device_table(df: pd.DataFrame, n_layer: int) -> pd.DataFrame:
    """The device series: MiB per step RAM → device and device → RAM by model size."""
    sub = df[(df.n_layer == n_layer) & (df.system == "nntile_lab_device")
             & (df.status == "ok")].sort_values("params")
    t = pd.DataFrame({"RAM → device": sub["ram_to_device_mb"].to_numpy(),
                      "device → RAM": sub["device_to_ram_mb"].to_numpy()},
                     index=[size_label(p) for p in sub.params])
    t.index.name = "model size"
    return t


def device_figure(df: pd.DataFrame, n_layer: int, cap_mb: float, panel: str = ""):
    """What the device-capped series moved: MiB per step each way over the bus."""
    fig = Figure(figsize=(7, 3.4))
    ax = fig.subplots()
    table = device_table(df, n_layer)
    grouped_bars(ax, table, "MiB moved per training step",
                 colors={"RAM → device": "#9467bd", "device → RAM": "#c5b0d5"})
    ax.set_xlabel("model size (parameters, 12·L·E² + V·E)")
    ax.set_title(f"{panel}{n_layer} layers, OpenCL device capped at {cap_mb:.0f} MiB → RAM: "
                 "bytes per bus", fontsize=10)
    fig.tight_layout()
    return fig
