"""The tile-size sweep widget: which tile sizes make this model train fastest here?

Controls: the model's size (n_layer, n_head, n_embd, vocab_size, seq_len, batch), one text
box per tile field taking a comma list (``256,512``), an inclusive range
(``128:1024:128``) or nothing (the default tile), the scheduler and the worker count; the
Run button sweeps the grid with ``nntile_lab.sweep.run`` (cached, a subprocess per point)
and redraws the GFLOP/s / step-time plot after every point, the best point starred.
Picking a point shows its Gantt chart and memory plot (each point keeps its trace).

A thin view: ``points()``, ``run()`` and ``show_point(i)`` are the callbacks, plain methods
that tests call without a browser.
"""
from __future__ import annotations

import ipywidgets as w
import pandas as pd

from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.widgets.common import error_html, failures, image, label, notice_html, png

MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "vocab_size", "seq_len", "batch")


class TileSweep:
    """``TileSweep(base, tiles={"inner_tile": "256,512"})``; display it or its ``.view``."""

    def __init__(self, base: ExperimentSpec | None = None, tiles: dict | None = None, *,
                 cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        from nntile_lab.runtime import max_workers, scheduler_names
        self.base = base or ExperimentSpec()
        self.cache_dir, self.isolate, self.peak_gflops = cache_dir, isolate, peak_gflops
        tiles = tiles if tiles is not None else {"inner_tile": "256,512,1024"}
        self.model = {f: w.IntText(value=getattr(self.base, f), description=f,
                                   layout=w.Layout(width="190px")) for f in MODEL_FIELDS}
        self.tiles = {f: w.Text(value=str(tiles.get(f, "")), description=f,
                                placeholder=f"default {getattr(self.base, f) or 'whole'}",
                                layout=w.Layout(width="260px")) for f in TILE_FIELDS}
        self.scheduler = w.Dropdown(options=scheduler_names(), value=self.base.scheduler,
                                    description="scheduler")
        self.ncpu = w.BoundedIntText(value=self.base.ncpu or min(max_workers(), _cores()),
                                     min=1, max=max_workers(), description="workers")
        self.run_button = w.Button(description="Run sweep", button_style="primary",
                                   icon="play")
        self.run_button.add_class("nl-sweep-run")
        self.run_button.on_click(lambda _: self.run())
        self.status = label("nl-sweep-status", "0 points")
        self.message = label("nl-sweep-message")
        self.plot = image("nl-sweep-plot")
        self.point = w.Dropdown(options=[], description="point")
        self.point.add_class("nl-sweep-point")
        self.point.observe(self._picked, names="value")
        self.detail = w.VBox([])
        self.detail.add_class("nl-sweep-detail")
        self.df: pd.DataFrame | None = None
        self.rows: list[dict] = []
        model_box = w.VBox([w.HTML("<b>model</b>"), *self.model.values()])
        tile_box = w.VBox([w.HTML("<b>tile sizes</b> (a,b,c or low:high:step; empty = "
                                  "default)"), *self.tiles.values()])
        run_box = w.VBox([w.HTML("<b>runtime</b>"), self.scheduler, self.ncpu,
                          self.run_button, self.status])
        self.view = w.VBox([w.HBox([model_box, tile_box, run_box]), self.message, self.plot,
                            self.point, self.detail])

    def _ipython_display_(self):
        from IPython.display import display
        display(self.view)

    # ---- callbacks ---------------------------------------------------------------------
    def points(self) -> list:
        """The grid the controls describe (ValueError with the bad value and the fix)."""
        from nntile_lab.sweep import grid, parse_axes
        base = self.base.replace(**{f: c.value for f, c in self.model.items()},
                                 scheduler=self.scheduler.value, ncpu=self.ncpu.value)
        axes = parse_axes({f: c.value for f, c in self.tiles.items() if c.value.strip()})
        if not axes:
            raise ValueError("no tile sizes to vary: enter values in a tile box, e.g. "
                             "inner_tile 256,512,1024")
        self._axes = [a for a, v in axes.items() if len(v) > 1] or list(axes)
        return grid(base, **axes)

    def run(self) -> pd.DataFrame | None:
        """The Run button: sweep, redrawing after each point; None if the input is bad."""
        from nntile_lab.sweep import run
        from nntile_lab.sweep.plots import best
        self.message.value = ""
        try:
            pts = self.points()
        except ValueError as exc:
            self.message.value = error_html(str(exc))
            return None
        self.rows, self._total = [], len(pts)
        self.status.value = f"running: 0 of {len(pts)} points"
        self.run_button.disabled = True
        try:
            df = run(pts, self.cache_dir, isolate=self.isolate, progress=False,
                     on_point=self._on_point, peak_gflops=self.peak_gflops)
        except Exception as exc:          # shown in the widget, not lost in a log
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
            return None
        finally:
            self.run_button.disabled = False
        self.df = df
        b = best(df)
        self.message.value = notice_html([*df.attrs.get("messages", []), *failures(df)])
        self.status.value = f"done: {len(df)} points" + (
            f", best {', '.join(f'{a}={b[a]}' for a in self._axes)}: {b['gflops']:.1f} GFLOP/s"
            if b is not None else ", none ran")
        self._draw(df)
        self.point.options = [(self._label(r), i) for i, r in df.iterrows() if r["trace_dir"]]
        return df

    def show_point(self, index: int) -> None:
        """The Gantt chart and memory plot of point ``index`` (a row of ``self.df``)."""
        from nntile_lab.trace import Trace, viz
        row = self.df.loc[index]
        if not row["trace_dir"]:
            self.detail.children = [w.HTML(error_html(f"point {index} has no trace: "
                                                      f"{row['error'] or 'not kept'}"))]
            return
        try:
            tr = Trace.load(row["trace_dir"])
        except (OSError, ValueError) as exc:
            self.detail.children = [w.HTML(error_html(
                f"the trace of point {index} cannot be read ({exc}); run the sweep again"))]
            return
        gantt, memory = image("nl-sweep-gantt"), image("nl-sweep-memory")
        gantt.value = png(viz.gantt(tr, step=int(tr.steps["step"].iloc[-1])))
        memory.value = png(viz.memory(tr))
        self.detail.children = [w.HTML(f"<b>{self._label(row)}</b>: "
                                       f"{row['gflops']:.2f} GFLOP/s, "
                                       f"{row['step_time_s'] * 1e3:.1f} ms/step"),
                                gantt, memory]

    # ---- internals ---------------------------------------------------------------------
    def _on_point(self, row: dict) -> None:
        self.rows.append(row)
        self.status.value = f"running: {len(self.rows)} of {self._total} points"
        self._draw(pd.DataFrame.from_records(self.rows))

    def _draw(self, df: pd.DataFrame) -> None:
        from nntile_lab.sweep.plots import tile_figure
        x = self._axes[0] if self._axes else None
        self.plot.value = png(tile_figure(df, x=x, title="Tile sweep"))

    def _label(self, row) -> str:
        return ", ".join(f"{a}={row[a]}" for a in self._axes)

    def _picked(self, change) -> None:
        if change["new"] is not None:
            self.show_point(change["new"])


def _cores() -> int:
    import os
    return os.cpu_count() or 1
