"""``tune``'s figure: what it measured against what it predicted (from its candidates'
table, ``tune.run.TuneResult.table``, or a tune record's ``results.candidates``).

Left: measured against predicted step time for each measured candidate, as predicted just
before it was measured (the line: a perfect prediction; the order of measurement beside each
point; ★ the chosen tiling). Right: every
candidate's predicted GFLOP/s, best first, with the measured ones' GFLOP/s over them — how
far down the predicted ranking the measurements had to go.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nntile_lab.jupyter_figure import WIDTH, Figure
from nntile_lab.plots.common import words


def _label(row, axes) -> str:
    return ", ".join(f"{a.replace('_tile', '')}={row[a]}" for a in axes)


def figure(table: pd.DataFrame, axes, title: str | None = None) -> Figure:
    fig = Figure(figsize=(WIDTH, 4.2), layout="constrained")
    table = pd.DataFrame(table)
    ran = table[table["measured_step_s"].notna()] if len(table) else table
    if not len(ran):
        return words(fig, "no candidate was measured")
    left, right = fig.subplots(1, 2)
    then = "predicted_then_s" if "predicted_then_s" in ran else "predicted_step_s"
    pred_ms = ran[then].astype(float) * 1e3
    meas_ms = ran["measured_step_s"].astype(float) * 1e3
    best = ran.loc[meas_ms.idxmin()]
    left.scatter(pred_ms, meas_ms, color="tab:blue", zorder=3)
    for (_, r), x, y in zip(ran.iterrows(), pred_ms, meas_ms):
        left.annotate(str(int(r["order"])) if pd.notna(r["order"]) else "", (x, y),
                      textcoords="offset points", xytext=(4, 4), fontsize=7)
    lo, hi = float(min(pred_ms.min(), meas_ms.min())), float(max(pred_ms.max(), meas_ms.max()))
    left.plot([lo, hi], [lo, hi], color="gray", lw=1, ls="--", label="measured = predicted")
    left.plot([best[then] * 1e3], [best["measured_step_s"] * 1e3], "*", ms=16,
              color="gold", mec="black", zorder=4, label=f"chosen: {_label(best, axes)}")
    left.set_xlabel("predicted step (ms)")
    left.set_ylabel("measured step (ms, median)")
    left.grid(alpha=0.3)
    left.legend(fontsize="small")
    cands = table[table["status"] != "pruned"].sort_values("predicted_step_s")
    x = np.arange(len(cands))
    right.plot(x, cands["predicted_gflops"].astype(float), color="tab:gray", lw=1,
               label="predicted")
    got = cands["measured_gflops"].astype(float)
    right.plot(x[got.notna().to_numpy()], got.dropna(), "o", color="tab:blue",
               label="measured")
    right.set_xlabel("candidates, best predicted first")
    right.set_ylabel("GFLOP/s (model FLOPs)")
    right.set_ylim(bottom=0)
    right.grid(alpha=0.3)
    right.legend(fontsize="small")
    fig.suptitle(title or "tune: measured against predicted")
    return fig
