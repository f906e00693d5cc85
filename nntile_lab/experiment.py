"""Running what an ``ExperimentSpec`` describes: the runtime, model and optimizer it builds,
and its training steps.

The layer between the spec and its users: ``train``, ``trace`` (steps under a Trace),
``bench`` and ``sweep`` import this module; it imports the model, optimizer and runtime,
and nothing above them (docs/layout.md).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from nntile_lab.data import load_split, prepare_default_corpus
from nntile_lab.memory import check
from nntile_lab.spec import ExperimentSpec


def build(spec: ExperimentSpec):
    """``(model, optimizer, schedule)``; call inside a running ``Runtime``."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.nn import GPT2
    from nntile_lab.optim import SGD, Adam, AdamW

    model = GPT2(spec.gpt2_config(), seed=spec.seed)
    wd = spec.weight_decay_resolved
    if spec.optimizer == "sgd":
        opt = SGD(model, lr=spec.lr, momentum=0.9, weight_decay=wd)
    else:
        cls = AdamW if spec.optimizer == "adamw" else Adam
        opt = cls(model, lr=spec.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=wd)
    return model, opt, spec.schedule()


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


def step_function(spec: ExperimentSpec, rt, model, optimizer, schedule, batches):
    """``step(k)``: one optimizer step ``k`` (0-based) of ``grad_accum`` micro-batches,
    waiting for its tasks (so a timer around it measures the whole step)."""
    rng = np.random.default_rng(spec.seed)
    clip = spec.clip or None

    def step(k: int) -> None:
        for micro in range(spec.grad_accum):
            ids, labels = batches.sample_batch(spec.batch, spec.seq_len, rng)
            model.forward_backward(ids, labels, accumulate=micro > 0,
                                   grad_scale=1.0 / spec.grad_accum)
        optimizer.step(schedule(k), clip)
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
