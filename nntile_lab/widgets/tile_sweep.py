"""The tile-size sweep widget: which tile sizes make this model train fastest here?

Controls: the model's size (n_layer, n_head, n_embd, vocab_size, seq_len, batch), one text
box per tile field taking a comma list (``256,512``), an inclusive range
(``128:1024:128``) or nothing (the default tile), the scheduler and the worker count; the
Run button sweeps the grid with ``nntile_lab.sweep.run`` (cached, a subprocess per point)
and redraws the GFLOP/s / step-time plot after every point, the best point starred.
Picking a point shows its Gantt chart and memory plot (each point keeps its trace); a new
sweep empties the picker and that detail first (never a previous point under a new plot).
Plots are live ipympl canvases (zoom, pan; the Gantt chart names the task under the cursor).
Messages use the fields' names (``inner_tile``), not the CLI's flags.

A thin view: ``points()``, ``run()`` and ``show_point(i)`` are the callbacks, plain methods
that tests call without a browser. DOM classes: nl-sweep-run, -status, -message, -plot,
-point, -detail, -gantt, -memory (each plot's canvas: <class>-canvas; a sentence in a plot's
place: <class>-words).
"""
from __future__ import annotations

import os

import ipywidgets as w

from nntile_lab.plots.sweep import best, tile_figure
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.sweep import grid, parse_axes
from nntile_lab.widgets.common import PlotArea, SweepView, error_html

MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "vocab_size", "seq_len", "batch")


class TileSweep(SweepView):
    """``TileSweep(base, tiles={"inner_tile": "256,512"})``; display it or its ``.view``."""

    def __init__(self, base: ExperimentSpec | None = None, tiles: dict | None = None, *,
                 cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.runtime import max_workers, scheduler_names
        self.base = base or ExperimentSpec()
        self._init_view("nl-sweep", "Run sweep", cache_dir, isolate, peak_gflops)
        tiles = tiles if tiles is not None else {"inner_tile": "256,512,1024"}
        self.model = {f: w.IntText(value=getattr(self.base, f), description=f,
                                   layout=w.Layout(width="190px")) for f in MODEL_FIELDS}
        self.tiles = {f: w.Text(value=str(tiles.get(f, "")), description=f,
                                placeholder=f"default {getattr(self.base, f) or 'whole'}",
                                layout=w.Layout(width="260px")) for f in TILE_FIELDS}
        names = scheduler_names()
        # a base scheduler this build lacks cannot be the dropdown's value: say so, use the
        # spec's default, and let the user pick
        known = self.base.scheduler in names
        self.scheduler = w.Dropdown(options=names, description="scheduler",
                                    value=self.base.scheduler if known else
                                    ExperimentSpec().scheduler)
        self.ncpu = w.BoundedIntText(value=self.base.ncpu or min(max_workers(),
                                                                 os.cpu_count() or 1),
                                     min=1, max=max_workers(), description="workers")
        self.plot = PlotArea("nl-sweep-plot")
        self.point = w.Dropdown(options=[], description="point")
        self.point.add_class("nl-sweep-point")
        self.point.observe(self._picked, names="value")
        self.detail = w.VBox([])
        self.detail.add_class("nl-sweep-detail")
        self.gantt, self.memory = PlotArea("nl-sweep-gantt"), PlotArea("nl-sweep-memory")
        self._axes: list[str] = []
        model_box = w.VBox([w.HTML("<b>model</b>"), *self.model.values()])
        tile_box = w.VBox([w.HTML("<b>tile sizes</b> (a,b,c or low:high:step; empty = "
                                  "default)"), *self.tiles.values()])
        run_box = w.VBox([w.HTML("<b>runtime</b>"), self.scheduler, self.ncpu,
                          self.run_button, self.status])
        self.view = w.VBox([w.HBox([model_box, tile_box, run_box]), self.message,
                            self.plot.box, self.point, self.detail])
        if not known:
            self.message.value = error_html(
                f"unknown scheduler {self.base.scheduler!r}; valid ones: {', '.join(names)} "
                f"(the sweep uses {self.scheduler.value!r}: pick another in the list)")

    def points(self) -> list:
        """The grid the controls describe (ValueError with the bad value and the fix)."""
        base = self.base.replace(**{f: c.value for f, c in self.model.items()},
                                 scheduler=self.scheduler.value, ncpu=self.ncpu.value)
        axes = parse_axes({f: c.value for f, c in self.tiles.items() if c.value.strip()})
        if not axes:
            raise ValueError("no tile sizes to vary: enter values in a tile box, e.g. "
                             "inner_tile 256,512,1024")
        self._axes = [a for a, v in axes.items() if len(v) > 1] or list(axes)
        return grid(base, **axes)

    def show_point(self, index: int) -> None:
        """The Gantt chart (last measured step) and memory plot of point ``index``."""
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.trace import Trace, viz
        row = self.df.loc[index]
        self.gantt.clear()
        self.memory.clear()
        if not row["trace_dir"]:
            self._detail(error_html(f"point {index} has no trace: "
                                    f"{row['error'] or 'not kept'}"))
            return
        try:
            tr = Trace.load(row["trace_dir"])
        except (OSError, ValueError) as exc:
            self._detail(error_html(f"the trace of point {index} cannot be read ({exc}); "
                                    "run the sweep again"))
            return
        step = int(tr.steps["step"].iloc[-1])
        self.gantt.show(viz.gantt(tr, step=step, title=f"{self._label(row)}, step {step}"))
        self.memory.show(viz.memory(tr))
        self._detail(f"<b>{self._label(row)}</b>: {row['gflops']:.3g} GFLOP/s, "
                     f"{row['step_time_s'] * 1e3:.3g} ms/step", plots=True)

    def _detail(self, html_text: str, plots: bool = False) -> None:
        self.detail.children = [w.HTML(html_text),
                                *((self.gantt.box, self.memory.box) if plots else ())]

    def _draw(self, df) -> None:
        if self._nothing_ran(df):
            return
        x = self._axes[0] if self._axes else None
        self.plot.show(tile_figure(df, x=x, title="Tile sweep"))

    def _started(self) -> None:
        super()._started()
        self.df = None
        self.point.options = []          # the previous sweep's points are gone
        self.gantt.clear()
        self.memory.clear()
        self.detail.children = []

    def _best_text(self, df) -> str:
        b = best(df)
        return ", none ran" if b is None else (
            f", best {self._label(b)}: {b['gflops']:.3g} GFLOP/s")

    def _finished(self, df) -> None:
        self.point.options = [(self._label(r), i) for i, r in df.iterrows() if r["trace_dir"]]

    def _label(self, row) -> str:
        return ", ".join(f"{a}={row[a]}" for a in self._axes)

    def _picked(self, change) -> None:
        if change["new"] is not None:
            self.show_point(change["new"])
