"""``bench depth``'s figure: throughput per FLOP against depth, in memory and out of core,
with the idle share and the critical path's share of the step (from ``bench.depth.summarize``:
one row per (mode, depth) of the points' records)."""
from __future__ import annotations

import pandas as pd

from nntile_lab.jupyter_figure import Figure

IN_MEMORY, OUT_OF_CORE = "in memory", "out of core"


def figure(summary: pd.DataFrame, title: str | None = None) -> Figure:
    """Per-FLOP ratio to the shallowest against depth (median, whiskers min–max; the 0.95
    line), one line per memory mode; under it the idle share and the critical path's share
    of the step. × = a depth that failed."""
    fig = Figure(figsize=(8.0, 6.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    colors = {IN_MEMORY: "tab:blue", OUT_OF_CORE: "tab:orange"}
    for mode, s in summary.groupby("mode", sort=False):
        c = colors.get(mode, "tab:gray")
        ok = s[s["error"].isna()]
        ratio = ok["ratio"].astype(float)
        y = ratio.fillna(1.0)           # the shallowest: 1 by definition, no spread
        x = list(ok["n_layer"])
        lo = (ratio - ok["ratio_min"].astype(float)).fillna(0.0)
        hi = (ok["ratio_max"].astype(float) - ratio).fillna(0.0)
        top.errorbar(x, list(y), yerr=[list(lo), list(hi)], marker="o", capsize=3, color=c,
                     label=mode)
        bad = s[s["error"].notna()]["n_layer"]
        if len(bad):
            top.plot(bad, [1.0] * len(bad), "x", color="crimson", ms=9)
        bottom.plot(ok["n_layer"], 100 * ok["idle"].astype(float), "o-", color=c,
                    label=f"idle, {mode}")
        bottom.plot(ok["n_layer"], 100 * ok["critical_path_share"].astype(float), "s--",
                    color=c, alpha=0.7, label=f"critical path / step, {mode}")
    top.axhline(0.95, color="gray", ls=":", lw=1)
    top.set_ylabel("GFLOP/s ÷ the shallowest's")
    top.legend(fontsize="small")
    bottom.set_ylabel("% of worker time / of step")
    bottom.set_xlabel("layers")
    bottom.legend(fontsize="small")
    depths = sorted(summary["n_layer"].unique())
    bottom.set_xticks(depths, [str(d) for d in depths])
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    fig.suptitle(title or "Throughput per FLOP against depth")
    return fig
