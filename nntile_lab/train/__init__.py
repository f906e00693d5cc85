"""Training: the loop, LR schedules, checkpoints, loss plots and run records.

Needs numpy, pandas, tqdm and matplotlib only; the model and optimizer come from the caller
(``nntile_lab.nn`` / ``nntile_lab.optim``, or any object with the same interface).
"""
from pathlib import Path

from nntile_lab.engine import save_record
from nntile_lab.train.checkpoint import (
    Checkpoint,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from nntile_lab.train.plots import plot_loss, save_loss_plot
from nntile_lab.train.schedule import Constant, WarmupCosine
from nntile_lab.train.trainer import NonFiniteLoss, evaluate, log_frame, train


def write_run_record(out_dir, config: dict, results: dict, spec=None) -> Path:
    """``OUT/run.json``: the engine's record of a training run (kind ``train``;
    ``config``: what else describes the run)."""
    return save_record(Path(out_dir) / "run.json", "train", spec, results, config=config)


__all__ = [
    "Checkpoint",
    "Constant",
    "NonFiniteLoss",
    "WarmupCosine",
    "evaluate",
    "find_checkpoint",
    "load_checkpoint",
    "log_frame",
    "plot_loss",
    "save_checkpoint",
    "save_loss_plot",
    "train",
    "write_run_record",
]
