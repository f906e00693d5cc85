"""The trace explorer: pick a step, a worker, a layer and a phase of a recorded trace and
see the most expensive ops of that slice and its Gantt chart.

``TraceExplorer(trace or directory)`` (a ``Trace`` or what ``Trace.save``/``nntile-lab
trace --out`` wrote); ``select(...)`` and ``update()`` are the callbacks.
"""
from __future__ import annotations

import copy
from pathlib import Path

import ipywidgets as w
import pandas as pd

from nntile_lab.trace import viz
from nntile_lab.widgets.common import error_html, image, label, png

ALL = "all"


class TraceExplorer:
    def __init__(self, trace):
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.trace import Trace
        if isinstance(trace, (str, Path)):
            if not (Path(trace) / "tasks.csv").exists():
                raise FileNotFoundError(f"{trace} holds no trace (no tasks.csv): give a "
                                        "directory written by Trace.save or nntile-lab trace")
            trace = Trace.load(str(trace))
        self.trace = trace
        t = trace.tasks

        def choices(col):
            return [(ALL, None)] + [(str(v), v) for v in sorted(t[col].dropna().unique())]
        self.step = w.Dropdown(options=choices("step"), description="step")
        self.worker = w.Dropdown(options=[(ALL, None)] + [
            (f"{n} ({k})", k) for k, n in sorted(dict(zip(t["worker"], t["worker_name"]))
                                                 .items())], description="worker")
        self.layer = w.Dropdown(options=choices("layer"), description="layer")
        self.phase = w.Dropdown(options=choices("phase"), description="phase")
        for c, cls in ((self.step, "nl-trace-step"), (self.worker, "nl-trace-worker"),
                       (self.layer, "nl-trace-layer"), (self.phase, "nl-trace-phase")):
            c.add_class(cls)
            c.observe(lambda _: self.update(), names="value")
        self.table = label("nl-trace-table")
        self.plot = image("nl-trace-plot")
        self.view = w.VBox([w.HBox([self.step, self.worker]), w.HBox([self.layer, self.phase]),
                            self.table, self.plot])
        self.update()

    def _ipython_display_(self):
        # IPython: an optional heavy dependency, loaded where it is used
        from IPython.display import display
        display(self.view)

    def select(self, step=None, worker=None, layer=None, phase=None) -> pd.DataFrame:
        """The tasks of the slice (None: any); ValueError naming a value the trace lacks."""
        t = self.trace.tasks
        for col, v in (("step", step), ("worker", worker), ("layer", layer),
                       ("phase", phase)):
            if v is None:
                continue
            if v not in set(t[col]):
                raise ValueError(f"{col}={v!r} is not in this trace; it has "
                                 f"{sorted(set(t[col].dropna()))}")
            t = t[t[col] == v]
        return t

    def ops(self, tasks: pd.DataFrame, top: int = 12) -> pd.DataFrame:
        """Per op of the slice: tasks, total and mean ms, GFLOP/s while running."""
        g = tasks.groupby("name")
        out = pd.DataFrame({"tasks": g.size(), "total_ms": g["duration_us"].sum() / 1e3,
                            "mean_ms": g["duration_us"].mean() / 1e3,
                            "gflops": g["flops"].sum() / g["duration_us"].sum() / 1e3})
        return out.sort_values("total_ms", ascending=False).head(top).round(3)

    def update(self) -> pd.DataFrame:
        """Redraw the table and the Gantt chart for the current selection."""
        sel = self.select(self.step.value, self.worker.value, self.layer.value,
                          self.phase.value)
        if not len(sel):
            self.table.value = error_html("no task matches this selection")
            self.plot.value = b""
            return sel
        busy = sel["duration_us"].sum() / 1e3
        self.table.value = (f"<b>{len(sel)} tasks, {busy:.1f} ms of worker time</b>"
                            + self.ops(sel).to_html())
        sub = copy.copy(self.trace)
        sub.tasks = sel
        self.plot.value = png(viz.gantt(sub))
        return sel
