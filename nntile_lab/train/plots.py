"""Loss curves of a training run, drawn off-screen.

A ``Figure`` drawn by Agg on ``savefig`` (never pyplot's global state), so plotting works on
headless machines, in threads and in notebooks alike, and never opens a window; in Jupyter
the figure displays itself (``nntile_lab.jupyter_figure``).
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from nntile_lab.jupyter_figure import Figure, save_figure


def plot_loss(log: pd.DataFrame, title: str | None = None) -> Figure:
    """Training loss per step as a line, validation loss as points, on one axis."""
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # steps are whole
    ax.plot(log["step"], log["loss"], lw=1, color="tab:blue", label="train loss")
    val = log.dropna(subset=["val_loss"])
    if len(val):
        ax.plot(val["step"], val["val_loss"], "o-", ms=4, color="tab:orange",
                label="validation loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return fig


def save_loss_plot(log: pd.DataFrame, out_dir: str | os.PathLike,
                   title: str | None = None) -> Path:
    """Write ``OUT/loss.png`` (temporary file, then rename: never a half-written image)."""
    return save_figure(plot_loss(log, title), Path(out_dir) / "loss.png", dpi=120)
