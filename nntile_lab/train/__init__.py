"""Training: the loop, LR schedules, checkpoints, loss plots and run records.

Needs numpy, pandas, tqdm and matplotlib only; the model and optimizer come from the caller
(``nntile_lab.nn`` / ``nntile_lab.optim``, or any object with the same interface).
"""
from nntile_lab.record import write_run_record
from nntile_lab.train.checkpoint import (
    Checkpoint,
    find_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from nntile_lab.train.plots import plot_loss, save_loss_plot
from nntile_lab.train.schedule import Constant, WarmupCosine
from nntile_lab.train.trainer import NonFiniteLoss, evaluate, log_frame, train

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
