"""The training loop: batches, gradient accumulation, LR schedule, evaluation, logging,
checkpoints and exact resumption.

It drives any model and optimizer with the small interface below (the tiled GPT-2 and, in
tests, a PyTorch adapter), so the loop is tested without StarPU and the tiled model is
trained by the very code the tests exercise.

Model: ``config`` (dataclass), ``forward_backward(ids, labels, *, accumulate, grad_scale)
-> float`` (mean loss; gradients times ``grad_scale`` written or added), ``loss(ids, labels)
-> float``, ``state_dict()`` / ``load_state_dict(d)`` (numpy arrays), ``flops_per_token(T)``.
Optimizer: ``step(lr, clip_norm) -> float`` (pre-clip global gradient norm),
``state_dict()`` / ``load_state_dict(d)``.

Exact resumption: batches are drawn from one ``numpy.random.Generator`` whose state is saved
with the parameters and the optimizer state, and the schedule is a pure function of the
step, so a resumed run computes the losses an uninterrupted run would have.
"""
from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nntile_lab.data.bins import load_split
from nntile_lab.experiment import NonFiniteValue, train_step
from nntile_lab.interrupts import Interrupted, check_stop, stoppable
from nntile_lab.spec import DEFAULTS  # keyword defaults are the spec's (one set)
from nntile_lab.train.checkpoint import (
    atomic_write_text,
    check_config,
    clean_stale,
    config_dict,
    load_checkpoint,
    save_checkpoint,
)
from nntile_lab.train.schedule import Constant
from nntile_lab.train.schedule import to_record as schedule_record

COLUMNS = ("step", "loss", "lr", "grad_norm", "tokens", "time_s", "tokens_per_s", "gflops",
           "val_loss")


class NonFiniteLoss(RuntimeError):
    """The loss (or gradient norm) became NaN or infinite; training stopped at ``step``."""

    def __init__(self, step: int, what: str, value: float, out_dir: Path):
        self.step, self.value = step, value
        super().__init__(
            f"{what} is {value} at step {step}: training stopped. The last good checkpoint "
            f"(if one was written) is kept in {out_dir}; resume from it with a lower learning "
            f"rate or clip norm")


def _positive_int(name: str, value, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _lr_schedule(schedule, optimizer):
    """A callable step -> lr from a callable, a number, or None (the optimizer's ``lr``)."""
    if callable(schedule):
        return schedule
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        return Constant(float(schedule))
    if schedule is None and isinstance(getattr(optimizer, "lr", None), (int, float)):
        return Constant(float(optimizer.lr))
    raise TypeError(f"schedule must be a callable step -> lr, a number, or None with an "
                    f"optimizer that has an `lr`; got {schedule!r}")


def _json_row(row: dict) -> dict:
    """A log row for JSON: NaN (not computed) becomes null."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def log_frame(rows: list[dict]) -> pd.DataFrame:
    """The run log as a DataFrame with the standard columns (NaN where not computed)."""
    return pd.DataFrame.from_records(rows, columns=list(COLUMNS)).astype(
        {c: "int64" if c in ("step", "tokens") else "float64" for c in COLUMNS})


def restore_log(out_dir, state: dict) -> bool:
    """Write ``OUT/log.csv`` from a checkpoint's log if the file disagrees with it (a run
    killed between writing its last checkpoint and its log); True if it was rewritten."""
    path = Path(out_dir) / "log.csv"
    rows = [{c: (math.nan if r.get(c) is None else r[c]) for c in COLUMNS}
            for r in state["log"]]
    text = log_frame(rows).to_csv(index=False)
    if path.is_file() and path.read_text() == text:
        return False
    atomic_write_text(path, text)
    return True


class _Run:
    """The mutable state of one training run; what a checkpoint stores besides arrays."""

    def __init__(self, model, optimizer, out_dir: Path, seed: int, settings: dict):
        self.model, self.optimizer, self.out_dir = model, optimizer, out_dir
        self.config = config_dict(model.config)
        self.settings = settings
        self.rng = np.random.default_rng(seed)
        self.step, self.tokens, self.elapsed_s, self.train_time_s = 0, 0, 0.0, 0.0
        self.rows: list[dict] = []

    def resume(self, path, train_tokens: int) -> None:
        ckpt = load_checkpoint(path)
        check_config(ckpt.state["config"], self.config, ckpt.path)
        saved_tokens = ckpt.state["data"]["train_tokens"]
        if saved_tokens != train_tokens:
            warnings.warn(f"checkpoint {ckpt.path} was trained on {saved_tokens} train "
                          f"tokens, the data now has {train_tokens}: batches will differ "
                          f"from the original run's", stacklevel=3)
        changed = [f"{k} {ckpt.state['settings'][k]} -> {self.settings[k]}"
                   for k in ("batch", "seq_len", "grad_accum", "precision")
                   if ckpt.state["settings"].get(k, self.settings[k]) != self.settings[k]]
        if changed:
            warnings.warn(f"resuming {ckpt.path} with changed settings ({', '.join(changed)}): "
                          f"the run continues, but not as the original would have",
                          stacklevel=3)
        self.model.load_state_dict(ckpt.model_state)
        self.optimizer.load_state_dict(ckpt.optimizer_state)
        self.rng.bit_generator.state = ckpt.state["rng"]
        self.step, self.tokens = ckpt.state["step"], ckpt.state["tokens"]
        self.elapsed_s, self.train_time_s = ckpt.state["elapsed_s"], ckpt.state["train_time_s"]
        self.rows = [{c: (math.nan if r.get(c) is None else r[c]) for c in COLUMNS}
                     for r in ckpt.state["log"]]

    def save(self, train_tokens: int, data_dir) -> None:
        save_checkpoint(self.out_dir, self.model.state_dict(), self.optimizer.state_dict(), {
            "step": self.step, "tokens": self.tokens, "elapsed_s": self.elapsed_s,
            "train_time_s": self.train_time_s, "rng": self.rng.bit_generator.state,
            "config": self.config, "settings": self.settings,
            "data": {"dir": str(data_dir), "train_tokens": train_tokens, "sampler": "random"},
            "log": [_json_row(r) for r in self.rows]})
        self.write_log()

    def write_log(self) -> None:
        path = self.out_dir / "log.csv"
        try:
            atomic_write_text(path, log_frame(self.rows).to_csv(index=False))
        except OSError as exc:
            raise OSError(exc.errno, f"could not write {path}: {exc.strerror or exc} (the "
                          "checkpoint, if any, is intact)") from exc

    def summary(self) -> dict:
        df = log_frame(self.rows)
        val = df["val_loss"].dropna()
        return _json_row({
            "summary": True, "steps": self.step,
            "final_loss": float(df["loss"].iloc[-1]) if len(df) else math.nan,
            "final_val_loss": float(val.iloc[-1]) if len(val) else math.nan,
            "best_val_loss": float(val.min()) if len(val) else math.nan,
            "total_time_s": self.elapsed_s, "train_time_s": self.train_time_s,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens / self.train_time_s if self.train_time_s else math.nan,
            "gflops": (self.tokens * self.settings["flops_per_token"] / self.train_time_s / 1e9
                       if self.train_time_s else math.nan),
            "out_dir": str(self.out_dir)})


def evaluate(model, val_bin, batch: int, seq_len: int, max_batches: int) -> float:
    """Mean validation loss over the first ``max_batches`` sequential (fixed) batches."""
    losses = [model.loss(x, y) for x, y in val_bin.sequential_batches(batch, seq_len,
                                                                      max_batches)]
    return float(np.mean(losses))


def train(model, optimizer, data_dir, *, steps: int, batch: int, seq_len: int,
          out_dir, schedule=None, grad_accum: int = DEFAULTS.grad_accum,
          clip_norm: float | None = DEFAULTS.clip or None,
          eval_every: int = DEFAULTS.eval_every, eval_batches: int = DEFAULTS.eval_batches,
          checkpoint_every: int = DEFAULTS.checkpoint_every, resume=None,
          seed: int = DEFAULTS.seed, progress: bool = True, json_lines: bool = False,
          log_every: int = 1, on_mark=None) -> pd.DataFrame:
    """Train until ``steps`` optimizer steps are done (counting those before ``resume``).

    Each step draws ``grad_accum`` random batches of ``batch × seq_len`` tokens from
    ``DATA/train.bin``; its learning rate is ``schedule(step - 1)`` (``step`` counts from 1).
    Every ``eval_every`` steps and at the end, the validation loss over the first
    ``eval_batches`` batches of ``DATA/val.bin`` is logged; every ``checkpoint_every`` steps
    and at the end a checkpoint goes to ``OUT/checkpoint/`` (0 turns either off, except at
    the end for checkpoints).  Rows are logged every ``log_every`` steps and on evaluations;
    the log is returned (``.attrs["summary"]`` holds the summary) and kept in
    ``OUT/log.csv``.  ``resume`` is a run or checkpoint directory to continue from.
    Raises ``NonFiniteLoss`` on a NaN/inf loss, leaving the last good checkpoint untouched.
    ``on_mark(step, phase)`` is called after each step's update (``"train"``) and after its
    evaluation and checkpoint (``"eval+checkpoint"``) — e.g. ``parallel.traffic.Traffic.mark``.
    """
    for name, value in (("steps", steps), ("batch", batch), ("seq_len", seq_len),
                        ("grad_accum", grad_accum), ("log_every", log_every),
                        ("eval_batches", eval_batches)):
        _positive_int(name, value)
    _positive_int("eval_every", eval_every, allow_zero=True)
    _positive_int("checkpoint_every", checkpoint_every, allow_zero=True)
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0 or None (no clipping), got {clip_norm!r}")
    n_positions = getattr(model.config, "n_positions", seq_len)
    if seq_len > n_positions:
        raise ValueError(f"seq_len={seq_len} exceeds the model's n_positions={n_positions}")
    lr_at = _lr_schedule(schedule, optimizer)
    train_bin = load_split(data_dir, "train")
    train_bin.sample_batch(batch, seq_len, np.random.default_rng(0))  # fail now if too short
    val_bin = load_split(data_dir, "val") if eval_every else None
    if val_bin is not None:
        val_bin.num_sequential_batches(batch, seq_len)  # fail now, not at the first eval
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir {out_dir} is a file, not a directory: give a directory "
                         "for the run's log and checkpoints")
    out_dir.mkdir(parents=True, exist_ok=True)
    clean_stale(out_dir)   # what a killed checkpoint write left behind
    fpt = float(model.flops_per_token(seq_len))
    run = _Run(model, optimizer, out_dir, seed, {
        "batch": batch, "seq_len": seq_len, "grad_accum": grad_accum, "seed": seed,
        "clip_norm": clip_norm, "flops_per_token": fpt,
        # the mode it trains in (auto resolved): `train --resume` continues in it
        "precision": getattr(model, "precision", "fp32"),
        "schedule": schedule_record(lr_at)})   # a resumed run keeps it (train/resume.py)
    if resume is not None:
        run.resume(resume, len(train_bin))
    bar = tqdm(total=steps, initial=min(run.step, steps), desc="train", unit="step",
               disable=not progress, dynamic_ncols=True)
    started = time.perf_counter() - run.elapsed_s
    # a kernel interrupt or a Stop button stops it whichever thread runs it (interrupts.py)
    with stoppable():
        try:
            while run.step < steps:
                check_stop()
                step = run.step + 1
                lr = float(lr_at(step - 1))
                t0 = time.perf_counter()
                try:
                    loss, grad_norm = train_step(model, optimizer, train_bin, run.rng, batch=batch,
                                                 seq_len=seq_len, grad_accum=grad_accum, lr=lr,
                                                 clip_norm=clip_norm)
                except NonFiniteValue as exc:
                    raise NonFiniteLoss(step, exc.what, exc.value, out_dir) from exc
                dt = time.perf_counter() - t0
                if on_mark is not None:
                    on_mark(step, "train")
                n_tokens = batch * seq_len * grad_accum
                run.step, run.tokens = step, run.tokens + n_tokens
                run.train_time_s += dt
                val_loss = math.nan
                if val_bin is not None and (step % eval_every == 0 or step == steps):
                    val_loss = evaluate(model, val_bin, batch, seq_len, eval_batches)
                run.elapsed_s = time.perf_counter() - started
                row = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm,
                       "tokens": run.tokens, "time_s": run.elapsed_s,
                       "tokens_per_s": n_tokens / dt, "gflops": fpt * n_tokens / dt / 1e9,
                       "val_loss": val_loss}
                if step % log_every == 0 or step == steps or not math.isnan(val_loss):
                    run.rows.append(row)
                    _report(bar, row, json_lines)
                bar.update(1)
                if (checkpoint_every and step % checkpoint_every == 0) or step == steps:
                    run.save(len(train_bin), data_dir)
                if on_mark is not None:
                    on_mark(step, "eval+checkpoint")
        except KeyboardInterrupt:
            saved = out_dir / "checkpoint"
            raise Interrupted(f"training interrupted during step {run.step + 1}; "
                              + (f"the last checkpoint is {saved}: resume with --resume {out_dir}"
                                 if saved.is_dir() else "no checkpoint was written yet")) from None
        finally:
            bar.close()
            run.write_log()
    summary = run.summary()
    if json_lines:
        print(json.dumps(summary), flush=True)
    df = log_frame(run.rows)
    df.attrs["summary"] = summary
    return df


def _report(bar, row: dict, json_lines: bool) -> None:
    postfix = {"loss": f"{row['loss']:.4f}", "tok/s": f"{row['tokens_per_s']:.0f}",
               "GFLOP/s": f"{row['gflops']:.2f}"}
    if not math.isnan(row["val_loss"]):
        postfix["val"] = f"{row['val_loss']:.4f}"
    bar.set_postfix(postfix, refresh=False)
    if json_lines:
        keys = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "gflops", "val_loss")
        out = {k: row[k] for k in keys if not (k == "val_loss" and math.isnan(row[k]))}
        print(json.dumps(_json_row(out)), flush=True)

