"""The trace explorer: pick a step, a worker, a layer and a phase of a recorded trace and
see the most expensive ops of that slice and its Gantt chart.

``TraceExplorer(trace or directory)`` (a ``Trace`` or what ``Trace.save``/``nntile-lab
trace --out`` wrote); ``select(...)`` and ``update()`` are the callbacks.

The Gantt chart is a live ipympl canvas: zoom and pan with its toolbar; the status line
names the task under the cursor; the range shown is written under it (nl-trace-range). Each
op keeps the colour it has in the whole trace. An empty slice says so in words (table and
plot), never shows the previous slice. DOM classes: nl-trace-step, -worker, -layer, -phase,
-table, -plot (its canvas: nl-trace-plot-canvas; a sentence: nl-trace-plot-words), -range.
"""
from __future__ import annotations

import copy
import html
from pathlib import Path

import ipywidgets as w
import pandas as pd

from nntile_lab.trace import viz
from nntile_lab.widgets.common import PlotArea, error_html, label

ALL = "all"
# what a slice and its Gantt chart cannot do without; the rest (step, layer, phase, the
# worker's name, flops) may be missing from a trace made elsewhere: its list offers "all"
NEEDED = ("name", "worker", "start_us", "end_us", "duration_us")
OPTIONAL = {"step": pd.NA, "layer": pd.NA, "phase": pd.NA, "worker_name": None,
            "flops": 0.0, "task_id": None, "bytes": 0.0}


class TraceExplorer:
    """``TraceExplorer(trace)``: a ``Trace`` or a directory ``Trace.save`` wrote."""

    def __init__(self, trace):
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.trace import Trace
        if isinstance(trace, (str, Path)):
            if not (Path(trace) / "tasks.csv").exists():
                raise FileNotFoundError(f"{trace} holds no trace (no tasks.csv): give a "
                                        "directory written by Trace.save or nntile-lab trace")
            trace = Trace.load(str(trace))
        self.trace, self.missing = _usable(trace)
        t = self.trace.tasks

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
            c.observe(self._changed, names="value")
        self.table = label("nl-trace-table")
        self.plot = PlotArea("nl-trace-plot")
        self.range = label("nl-trace-range")
        self.colors = None            # the whole trace's op colours, made at the first draw
        self.view = w.VBox([w.HBox([self.step, self.worker]), w.HBox([self.layer, self.phase]),
                            self.table, self.plot.box, self.range])
        self.update()

    def _ipython_display_(self):
        # IPython: an optional heavy dependency, loaded where it is used
        from IPython.display import display
        display(self.view)

    def select(self, step=None, worker=None, layer=None, phase=None) -> pd.DataFrame:
        """The tasks of the slice (None: any; may be empty); ValueError naming a value the
        whole trace lacks."""
        t = self.trace.tasks
        sel = t
        for col, v in (("step", step), ("worker", worker), ("layer", layer),
                       ("phase", phase)):
            if v is None:
                continue
            if v not in set(t[col]):
                raise ValueError(f"{col}={v!r} is not in this trace; it has "
                                 f"{sorted(set(t[col].dropna()))}")
            sel = sel[sel[col] == v]
        return sel

    def describe(self) -> str:
        """The current selection in words ("step 1, CPU 0, backward"; "whole trace")."""
        worker = {value: text for text, value in self.worker.options}
        parts = [f"step {self.step.value}" if self.step.value is not None else None,
                 worker[self.worker.value] if self.worker.value is not None else None,
                 f"layer {self.layer.value}" if self.layer.value is not None else None,
                 self.phase.value]
        return ", ".join(str(p) for p in parts if p is not None) or "whole trace"

    def ops(self, tasks: pd.DataFrame, top: int = 12) -> pd.DataFrame:
        """Per op of the slice: tasks, total and mean ms, GFLOP/s while running."""
        g = tasks.groupby("name")
        out = pd.DataFrame({"tasks": g.size(), "total_ms": g["duration_us"].sum() / 1e3,
                            "mean_ms": g["duration_us"].mean() / 1e3,
                            "gflops": g["flops"].sum() / g["duration_us"].sum() / 1e3})
        return out.sort_values("total_ms", ascending=False).head(top).round(3)

    def update(self) -> pd.DataFrame:
        """Redraw the table and the Gantt chart for the current selection (an empty slice:
        both say so)."""
        if self.colors is None:
            self.colors = viz.op_colors(self.trace.tasks["name"])
        what = self.describe()
        sel = self.select(self.step.value, self.worker.value, self.layer.value,
                          self.phase.value)
        if not len(sel):
            self.table.value = error_html(f"no task in this slice ({what}): pick another "
                                          "step, worker, layer or phase")
            self.plot.say(f"no task in this slice ({what})")
            self.range.value = ""
            return sel
        busy = sel["duration_us"].sum() / 1e3
        lacks = [c for c in self.missing if c in ("step", "layer", "phase")]
        note = (f"<br><i>this trace has no {', '.join(lacks)} column: "
                f"{'its list offers' if len(lacks) == 1 else 'their lists offer'} "
                f"“all” only</i>" if lacks else "")
        self.table.value = (f"<b>{len(sel)} tasks ({html.escape(what)}), {busy:.1f} ms of "
                            "worker time</b>" + note + self.ops(sel).to_html())
        sub = copy.copy(self.trace)
        sub.tasks = sel
        fig = viz.gantt(sub, title=what, colors=self.colors)
        ax = fig.axes[0]
        ax.callbacks.connect("xlim_changed", self._shown_range)
        self.plot.show(fig)
        self._shown_range(ax)
        return sel

    def _changed(self, _change) -> None:
        """A dropdown moved: redraw; a failure is said in the widget (a callback's
        exception would only reach JupyterLab's log console, under a stale plot)."""
        try:
            self.update()
        except Exception as exc:
            self.table.value = error_html(f"{type(exc).__name__}: {exc}")
            self.plot.say("no plot: the slice could not be drawn (the error is above)")
            self.range.value = ""

    def _shown_range(self, ax) -> None:
        lo, hi = ax.get_xlim()
        self.range.value = f"showing {lo:.3f}–{hi:.3f} ms"


def _usable(trace):
    """(a shallow copy of ``trace`` whose tasks have every column the explorer reads, the
    optional columns it lacked); a TypeError or ValueError naming what is expected."""
    tasks = getattr(trace, "tasks", None)
    if not isinstance(tasks, pd.DataFrame):
        raise TypeError("TraceExplorer(trace) takes a Trace (nntile_lab.trace.Trace, e.g. "
                        "from Trace.load or a `with Trace(rt) as tr:` block) or the directory "
                        f"Trace.save wrote; got {type(trace).__name__} {trace!r:.80}")
    lacking = [c for c in NEEDED if c not in tasks.columns]
    if lacking:
        raise ValueError(f"this trace's tasks have no {', '.join(lacking)} column(s): the "
                         f"explorer needs {', '.join(NEEDED)} (a trace recorded by "
                         "nntile_lab.trace.Trace has them)")
    missing = [c for c in OPTIONAL if c not in tasks.columns]
    if not missing:
        return trace, []
    tasks = tasks.copy()
    for c in missing:
        tasks[c] = (tasks["worker"].map(lambda k: f"worker {k}") if c == "worker_name"
                    else tasks.index if c == "task_id" else OPTIONAL[c])
    out = copy.copy(trace)
    out.tasks = tasks
    if not isinstance(getattr(out, "accesses", None), pd.DataFrame):
        out.accesses = pd.DataFrame(columns=["task_id", "handle", "mode"])
    return out, missing
