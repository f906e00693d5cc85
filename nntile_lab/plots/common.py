"""What the figures of records share: saving (PNG, PDF and the CSV behind a figure), a
figure that is a sentence, grouped bars with × for a 0, model-size labels."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.jupyter_figure import save_figure


def size_label(params: float) -> str:
    """1.5B / 26M / 850K: the paper labels its x axis by parameters."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if params >= scale:
            return f"{params / scale:.1f}{unit}" if params < 10 * scale else \
                f"{params / scale:.0f}{unit}"
    return str(int(params))


def words(fig, text: str):
    """A figure that is a sentence: no empty axes for an empty or failed result."""
    fig.text(0.5, 0.5, text, ha="center", va="center", fontsize="large")
    fig.set_size_inches(fig.get_figwidth(), 1.2)
    return fig


def grouped_bars(ax, table: pd.DataFrame, ylabel: str, colors=None, labels=None) -> None:
    """Bars of ``table`` (index: x categories in order, columns: series; NaN = not measured,
    0 = did not fit → a × at the baseline)."""
    colors = colors or {}
    n = max(1, len(table.columns))
    width = 0.8 / n
    xs = range(len(table.index))
    for i, series in enumerate(table.columns):
        offs = [x - 0.4 + width * (i + 0.5) for x in xs]
        vals = table[series].tolist()
        ax.bar(offs, [0 if pd.isna(v) else v for v in vals], width,
               label=(labels or {}).get(series, series), color=colors.get(series))
        zero = [o for o, v in zip(offs, vals) if not pd.isna(v) and v == 0]
        ax.plot(zero, [0] * len(zero), "x", color=colors.get(series, "k"), ms=7, mew=2,
                clip_on=False)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(table.index, rotation=0)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


def save(fig, out_dir, name: str, table: pd.DataFrame | None = None,
         formats=("png", "pdf")) -> list[Path]:
    """``name.png``, ``name.pdf`` (and ``name.csv`` from ``table``) in ``out_dir``, each
    written atomically."""
    out_dir = Path(out_dir)
    paths = [save_figure(fig, out_dir / f"{name}.{ext}", dpi=110) for ext in formats]
    if table is not None:
        paths.append(atomic_write_bytes(out_dir / f"{name}.csv", table.to_csv().encode()))
    return paths
