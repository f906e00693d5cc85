"""The measurements a point can name: one row each.

A measurement is a function ``fn(spec, ctx) -> dict`` (``ctx``: ``engine.worker.Context``:
its options, the memory cap, where to keep a trace) living with the study that owns it. The
engine knows it only by name here — the module is imported in the point's own process — so
the engine sits below every study and a new study adds one row. The row also says which
results a finished point must have (numbers), so that a record cut short or edited by hand
is never shown as a result.

``starts_cap``: the measurement starts the memory cap itself (``ctx.cap.start()``), once
what it loads lazily is loaded (the cap is on the memory the run itself uses); otherwise
the worker starts it before calling the measurement.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    name: str
    function: str                          # "package.module:function"
    required: tuple[str, ...] = ()         # numbers a point that fits must have
    numbers: tuple[str, ...] = ()          # numbers (or null) where present
    tables: tuple[str, ...] = ()           # objects of numbers where present
    starts_cap: bool = False
    says: str = ""


MEASURES = {m.name: m for m in (
    Measure("train-trace", "nntile_lab.sweep.measure:measure_point",
            required=("gflops", "step_time_s", "tokens_per_s"), tables=("memory_by_category",),
            says="warm-up steps, then traced training steps: GFLOP/s, idle share, critical "
                 "path, peaks (a sweep point)"),
    Measure("figure", "nntile_lab.figures.point:measure_point",
            required=("gflops",), numbers=("gflops", "peak_mb", "step_time_s", "tokens_per_s"),
            tables=("memory",), starts_cap=True,
            says="a figure's point: nntile_lab or PyTorch training steps under a RAM cap"),
    Measure("memory", "nntile_lab.bench.memory:measure_point",
            required=("step_time_s", "peak_rss_bytes"),
            says="bench memory's nntile_lab point: step time, StarPU and RSS peaks, disk "
                 "and bus traffic"),
    Measure("torch-memory", "nntile_lab.bench.memory:torch_point",
            required=("step_time_s", "peak_rss_bytes"),
            says="bench memory's PyTorch point: step time and peak RSS"),
)}


def get(name: str) -> Measure:
    """The row of ``name``; a "module:function" not in the table is a measurement too (a
    user's own), with no required results."""
    if name in MEASURES:
        return MEASURES[name]
    if isinstance(name, str) and ":" in name:
        return Measure(name, name)
    raise ValueError(f"unknown measurement {name!r}: one of {', '.join(MEASURES)}, or "
                     "'package.module:function'")
