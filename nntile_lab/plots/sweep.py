"""Figures of a sweep: its DataFrame, one row per point record (``sweep.run``; matplotlib
Figures that display themselves in Jupyter, no pyplot state).

``varied(df)``          the spec fields that take more than one value in the sweep.
``best(df, by)``        the row with the highest ``by`` among points without an error.
``tile_figure(df)``     one varied axis: GFLOP/s (with min–max spread) and step time
                        against it, one line per combination of the other varied fields
                        (with a ``predicted_gflops`` column: each point's prediction
                        beside it, hollow markers — the tile widget's);
                        two numeric axes and nothing else varied: a GFLOP/s heatmap.
                        The best point is marked with a star; failed points show as 0
                        (the paper's convention) with an ×; when no point ran the
                        figure says so in words.
``scheduler_figure(df)`` GFLOP/s bars per scheduler (grouped by the other varied
                        fields, e.g. priorities), min–max spread as error bars.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nntile_lab.jupyter_figure import WIDTH, Figure
from nntile_lab.plots.common import words as _words
from nntile_lab.spec import field_names


def varied(df: pd.DataFrame) -> list[str]:
    return [f for f in field_names() if f in df and _text(df[f]).nunique() > 1]


def _text(col: pd.Series) -> pd.Series:
    """Values as text for grouping (None/NaN → "None", which groupby would otherwise drop)."""
    return col.map(lambda v: "None" if v is None or (isinstance(v, float) and math.isnan(v))
                   else str(v))


def failed(row) -> bool:
    """A row without a measurement (its ``error`` says why): drawn as 0."""
    return not pd.isna(row["error"]) or pd.isna(row["gflops"])


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["error"].isna() & df["gflops"].notna()] if len(df) else df


def best(df: pd.DataFrame, by: str = "gflops") -> pd.Series | None:
    good = ok_rows(df)
    return None if not len(good) else good.loc[good[by].astype(float).idxmax()]


def _label(row, names) -> str:
    return ", ".join(f"{n}={row[n]}" for n in names) or "all"


def _order(values) -> list:
    vals = list(dict.fromkeys(values))
    try:
        return sorted(vals, key=lambda v: (v is None or (isinstance(v, float) and math.isnan(v)),
                                           v if v is not None else 0))
    except TypeError:
        return vals


def tile_figure(df: pd.DataFrame, x: str | None = None, title: str | None = None) -> Figure:
    axes = varied(df)
    x = x or (axes[0] if axes else None)
    fig = Figure(figsize=(WIDTH, 4.2), layout="constrained")
    if x is None or not len(df) or not len(ok_rows(df)):
        return _words(fig, "no points yet" if not len(df) else
                      f"none of the {len(df)} points ran (their errors say why)"
                      if not len(ok_rows(df)) else "one point: nothing varies")
    rest = [a for a in axes if a != x]
    numeric = len(rest) == 1 and all(pd.api.types.is_numeric_dtype(df[a].dropna())
                                     for a in (x, rest[0]))
    if numeric:
        _heatmap(fig, df, x, rest[0])
    else:
        _lines(fig, df, x, rest)
    n_ok, n = len(ok_rows(df)), len(df)
    fig.suptitle((title or "Sweep") + f" — {n} points" + (f", {n - n_ok} failed" if n_ok < n
                                                            else ""))
    return fig


def _positions(values):
    order = _order(values)
    return order, {v: i for i, v in enumerate(order)}


def _lines(fig, df, x, rest):
    ax, bx = fig.subplots(1, 2)
    order, pos = _positions(df[x].tolist())
    groups = df.groupby([_text(df[r]) for r in rest], sort=False) if rest else [("", df)]
    failed_label = "failed (0)"
    predicted_label = "predicted (before measuring)"
    for _, g in groups:
        label = _label(g.iloc[0], rest) if rest else None   # one line: nothing to tell apart
        good = ok_rows(g)
        xs = [pos[v] for v in good[x]]
        gf = good["gflops"].astype(float).to_numpy()
        lo = gf - good["gflops_min"].astype(float).to_numpy()
        hi = good["gflops_max"].astype(float).to_numpy() - gf
        line = ax.errorbar(xs, gf, yerr=[lo, hi], marker="o", capsize=3, label=label)
        if "predicted_gflops" in good and good["predicted_gflops"].notna().any():
            pred = good["predicted_gflops"].astype(float).to_numpy()
            ax.plot(xs, pred, ls=":", marker="o", mfc="none", color=line[0].get_color(),
                    label=predicted_label)
            predicted_label = None
        bx.plot(xs, good["step_time_s"].astype(float) * 1e3, marker="o",
                color=line[0].get_color(), label=label)
        bad = g[~g.index.isin(good.index)]
        if len(bad):
            ax.plot([pos[v] for v in bad[x]], np.zeros(len(bad)), "x", color="crimson",
                    ms=9, label=failed_label)
            failed_label = None
    b = best(df)
    if b is not None:
        ax.plot([pos[b[x]]], [b["gflops"]], "*", ms=18, color="gold", mec="black",
                label=f"best: {b['gflops']:.3g} GFLOP/s")
    for a, ylab in ((ax, "GFLOP/s (model FLOPs, median; bars min–max)"),
                    (bx, "step time (ms, median)")):
        a.set_xticks(range(len(order)), [str(v) for v in order])
        a.set_xlabel(x)
        a.set_ylabel(ylab)
        a.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    bx.set_ylim(bottom=0)
    ax.legend(fontsize="small")


def _heatmap(fig, df, x, y):
    ax = fig.subplots()
    xs, xpos = _positions(df[x].tolist())
    ys, ypos = _positions(df[y].tolist())
    grid = np.full((len(ys), len(xs)), np.nan)
    for _, r in df.iterrows():
        grid[ypos[r[y]], xpos[r[x]]] = 0.0 if failed(r) else float(r["gflops"])
    im = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
    fig.colorbar(im, ax=ax, label="GFLOP/s (median; 0 = failed)")
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not math.isnan(grid[i, j]):
                bright = grid[i, j] > np.nanmin(grid) + 0.6 * np.ptp(grid[~np.isnan(grid)])
                ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center",
                        color="black" if bright else "white", fontsize="small")
    b = best(df)
    if b is not None:
        ax.plot([xpos[b[x]] - 0.35], [ypos[b[y]] + 0.3], "*", ms=18, color="gold",
                mec="black", label=f"best: {b['gflops']:.3g} GFLOP/s")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)


def scheduler_figure(df: pd.DataFrame, title: str | None = None,
                     spread: str = "measured steps") -> Figure:
    """``spread``: what the whiskers span (``"repeats"`` after ``aggregate_repeats``)."""
    fig = Figure(figsize=(min(WIDTH, max(7, 0.5 * max(len(df), 1) + 3)), 4.6),
                 layout="constrained")
    if not len(df) or not len(ok_rows(df)):
        return _words(fig, "no points yet" if not len(df) else
                      f"none of the {len(df)} points ran (their errors say why)")
    ax = fig.subplots()
    rest = [a for a in varied(df) if a != "scheduler"]
    scheds = _order(df["scheduler"].tolist())
    groups = list(df.groupby([_text(df[r]) for r in rest], sort=False)) if rest \
        else [("", df)]
    width = 0.8 / len(groups)
    b = best(df)
    for k, (_, g) in enumerate(groups):
        label = _label(g.iloc[0], rest)
        xs, hs, lo, hi = [], [], [], []
        for i, s in enumerate(scheds):
            r = g[g["scheduler"] == s]
            if not len(r):
                continue
            r = r.iloc[0]
            v = 0.0 if failed(r) else float(r["gflops"])
            xs.append(i + (k - (len(groups) - 1) / 2) * width)
            hs.append(v)
            lo.append(v - float(r["gflops_min"]) if v else 0.0)
            hi.append(float(r["gflops_max"]) - v if v else 0.0)
            if b is not None and r.name == b.name:
                ax.plot([xs[-1]], [v], "*", ms=16, color="gold", mec="black", zorder=5)
        ax.bar(xs, hs, width=width, yerr=[lo, hi], capsize=3, label=label)
    ax.set_xticks(range(len(scheds)), scheds, rotation=45, ha="right")
    ax.set_ylabel("GFLOP/s (median)")
    ax.grid(axis="y", alpha=0.3)
    if rest:
        ax.legend(fontsize="small")
    n_ok = len(ok_rows(df))
    ax.set_title((title or "Schedulers") + f" — {len(df)} points"
                 + (f", {len(df) - n_ok} failed (0, ★ = best)" if n_ok < len(df)
                    else " (★ = best)")
                 + f"\nbars: median; whiskers: min–max over {spread}")
    return fig


def aggregate_repeats(df: pd.DataFrame, over: str = "seed") -> pd.DataFrame:
    """One row per point with ``over`` (the repeat index) collapsed: GFLOP/s and step time
    medians over the repeats' medians, ``gflops_min``/``gflops_max`` their extremes (the
    spread over repeats); a point fails when every repeat failed (first error kept)."""
    if not len(df):
        return df
    keys = [f for f in field_names() if f in df and f != over]
    rows = []
    for _, g in df.groupby([_text(df[k]) for k in keys], sort=False):
        good = ok_rows(g)
        row = g.iloc[0].copy()
        row[over] = None
        if len(good):
            gf = good["gflops"].astype(float)
            row["gflops"], row["gflops_min"], row["gflops_max"] = gf.median(), gf.min(), gf.max()
            row["step_time_s"] = good["step_time_s"].astype(float).median()
            row["error"] = None
        row["repeats"] = len(good)
        rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)
