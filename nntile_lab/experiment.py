"""Running what an ``ExperimentSpec`` describes: the runtime, model and optimizer it builds,
and its training steps.

Also the one training step (``train_step``: gradient accumulation and the optimizer
update) that the training loop (``train.trainer``) and ``step_function`` share.

The layer between the spec and its users: ``train.cli``, ``trace.cli``, ``bench`` and
``sweep`` import this module, it imports the model, optimizer and trace recorder, and none
of those imports a CLI (so there is no import cycle).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

from nntile_lab.data import load_split, prepare_default_corpus
from nntile_lab.memory import check, estimate
from nntile_lab.nn.config import model_class
from nntile_lab.spec import ExperimentSpec


def build(spec: ExperimentSpec):
    """``(model, optimizer, schedule)``: the model the spec names (``spec.model``); call
    inside a running ``Runtime``."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.optim import SGD, Adam, AdamW

    precision, why = choose_precision(spec)
    if spec.precision == "auto":
        print(f"nntile-lab: precision auto -> {precision}: {why}", file=sys.stderr)
    model = model_class(spec.model)(spec.model_config(), seed=spec.seed, precision=precision)
    model.precision_choice = {"asked": spec.precision, "mode": precision, "why": why}
    cls = {"adamw": AdamW, "adam": Adam, "sgd": SGD}[spec.optimizer]
    # the other hyper-parameters (betas, eps, momentum) are the classes' defaults: spec's
    opt = cls(model, lr=spec.lr, weight_decay=spec.weight_decay_resolved)
    return model, opt, spec.schedule()


# ``auto`` takes bf16 compute where the bf16 GEMM peak is at least this multiple of the
# fp32 one: the GEMMs are most of a step's FLOPs but not of its time, and bf16 adds a
# conversion pass per GEMM operand (docs/precision.md)
AUTO_BF16_RATIO = 1.5


def choose_precision(spec: ExperimentSpec, peaks=None) -> tuple[str, str]:
    """The precision mode a spec trains in and why: its ``precision``, or for ``auto``
    ``bf16`` where the measured bf16 GEMM peak is ≥ AUTO_BF16_RATIO × the fp32 one
    (``peaks()``: ``precision_peak.measure``, a few seconds, inside the running Runtime),
    else ``bf16-storage`` where the fp32 step does not fit its RAM cap (bf16 storage halves
    what goes to disk) and ``fp32`` where it does."""
    if spec.precision != "auto":
        return spec.precision, "given"
    if peaks is None:
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.precision_peak import measure as peaks
    entry = peaks()
    ratio = entry["ratio"]
    measured = (f"bf16 GEMM peak {entry['bf16_gflops']:.0f} GFLOP/s is {ratio:.2f}x the fp32 "
                f"one ({entry['fp32_gflops']:.0f})")
    if ratio >= AUTO_BF16_RATIO:
        return "bf16", f"{measured}, >= {AUTO_BF16_RATIO}"
    plan = estimate(spec.replace(precision="fp32"))
    if spec.memory_limit_mb is not None and plan.peak_bytes > spec.memory_limit_mb * 2**20:
        return "bf16-storage", (f"{measured}, < {AUTO_BF16_RATIO}; the fp32 step needs "
                                f"{plan.peak_bytes / 2**20:.0f} MiB, over the "
                                f"{spec.memory_limit_mb} MiB cap: bf16 storage")
    return "fp32", f"{measured}, < {AUTO_BF16_RATIO}, and the fp32 step fits in memory"


def runtime(spec: ExperimentSpec, **kw):
    """The ``Runtime`` a spec describes, once the memory planner agrees it can run: a run
    that cannot (cap below a task, no or too small a disk) fails here, before any task."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import Runtime
    check(spec)
    return Runtime(**spec.runtime_kwargs(), **kw)


class RandomTokens:
    """Uniform random token batches: throughput does not depend on the text, and a sweep
    point then needs no prepared corpus."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def sample_batch(self, batch: int, seq_len: int, rng: np.random.Generator):
        ids = rng.integers(0, self.vocab_size, (batch, seq_len + 1))
        return ids[:, :-1], ids[:, 1:]


def train_split(data):
    """The training split of a prepared dataset directory (None: the default corpus)."""
    return load_split(Path(data) if data else prepare_default_corpus(), "train")


# ---- the one training step: the training loop's (train.trainer) and step_function's
class NonFiniteValue(FloatingPointError):
    """The loss or the gradient norm of a step is NaN or infinite."""

    def __init__(self, what: str, value: float):
        self.what, self.value = what, value
        super().__init__(f"{what} is {value}")


def train_step(model, optimizer, batches, rng, *, batch: int, seq_len: int, grad_accum: int,
               lr: float, clip_norm: float | None) -> tuple[float, float]:
    """``grad_accum`` micro-batches of ``batch × seq_len`` tokens drawn from ``batches``
    (``sample_batch(batch, seq_len, rng)``), each gradient scaled by 1/grad_accum and
    added up, then ``optimizer.step(lr, clip_norm)``.

    Returns the mean loss and the pre-clip gradient norm (NaN when the optimizer reports
    none). Raises ``NonFiniteValue`` for a NaN or infinite loss, before the update, or
    gradient norm."""
    loss = 0.0
    for micro in range(grad_accum):
        ids, labels = batches.sample_batch(batch, seq_len, rng)
        loss += model.forward_backward(ids, labels, accumulate=micro > 0,
                                       grad_scale=1.0 / grad_accum) / grad_accum
    if not math.isfinite(loss):
        raise NonFiniteValue("the training loss", loss)
    norm = optimizer.step(lr, clip_norm)
    grad_norm = math.nan if norm is None else float(norm)   # None: not reported
    if norm is not None and not math.isfinite(grad_norm):
        raise NonFiniteValue("the gradient norm", grad_norm)
    return loss, grad_norm


def step_function(spec: ExperimentSpec, rt, model, optimizer, schedule, batches):
    """``step(k)``: one optimizer step ``k`` (0-based) of ``grad_accum`` micro-batches,
    waiting for its tasks (so a timer around it measures the whole step)."""
    rng = np.random.default_rng(spec.seed)

    def step(k: int) -> None:
        train_step(model, optimizer, batches, rng, batch=spec.batch, seq_len=spec.seq_len,
                   grad_accum=spec.grad_accum, lr=schedule(k), clip_norm=spec.clip or None)
        rt.wait()
    return step


def timed_steps(step, warmup_steps: int, measure_steps: int, first: int = 0) -> list[float]:
    """Wall seconds of ``measure_steps`` calls ``step(k)`` after ``warmup_steps`` untimed
    ones, ``k`` counting from ``first`` (any system's step: tiled or PyTorch)."""
    for k in range(first, first + warmup_steps):
        step(k)
    times = []
    for k in range(first + warmup_steps, first + warmup_steps + measure_steps):
        t0 = time.perf_counter()
        step(k)
        times.append(time.perf_counter() - t0)
    return times
