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

The Run button runs the sweep in a thread of its own; Stop or Kernel → Interrupt end it
within a second or two (widgets/background.py). An input error empties what showed the
previous sweep; number boxes refuse what is not a whole number; more than 500 points wait
for the "Run all N points" button (docs/jupyter.md, "The contract").

A thin view: ``points()``, ``run()``, ``start()``/``stop()`` and ``show_point(i)`` are the
callbacks, plain methods that tests call without a browser. DOM classes: nl-sweep-run,
-stop, -confirm, -status, -message, -plot, -point, -detail, -gantt, -memory (each plot's
canvas: <class>-canvas; a sentence in a plot's place: <class>-words).
"""
from __future__ import annotations

import os

import ipywidgets as w

from nntile_lab.plots.sweep import best, tile_figure
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec
from nntile_lab.sweep import grid, parse_axes
from nntile_lab.widgets.common import (
    PlotArea,
    SweepView,
    applicable_schedulers,
    check_base,
    check_count,
    error_html,
    int_box,
    read_int,
)

MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "vocab_size", "seq_len", "batch")


class TileSweep(SweepView):
    """``TileSweep(base, tiles={"inner_tile": "256,512"})``; display it or its ``.view``.

    ``base`` an ExperimentSpec (None: the default one); ``tiles`` maps tile fields
    (``inner_tile``, …) to what their boxes start with."""

    def __init__(self, base: ExperimentSpec | None = None, tiles: dict | None = None, *,
                 cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.runtime import max_workers
        self.base = check_base("TileSweep", base)
        tiles = _check_tiles(tiles)
        self._init_view("nl-sweep", "Run sweep", cache_dir, isolate, peak_gflops)
        self.model = {f: int_box(f, getattr(self.base, f)) for f in MODEL_FIELDS}
        self.tiles = {f: w.Text(value=str(tiles.get(f, "")), description=f,
                                placeholder=f"default {getattr(self.base, f) or 'whole'}",
                                layout=w.Layout(width="260px")) for f in TILE_FIELDS}
        names = applicable_schedulers()
        # a base scheduler this build lacks cannot be the dropdown's value: say so, use the
        # spec's default, and let the user pick
        known = self.base.scheduler in names
        self.scheduler = w.Dropdown(options=names, description="scheduler",
                                    value=self.base.scheduler if known else
                                    ExperimentSpec().scheduler)
        self.max_workers = max_workers()
        self.ncpu = int_box("workers", self.base.ncpu or min(self.max_workers,
                                                             os.cpu_count() or 1))
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
                          w.HBox([self.run_button, self.stop_button]), self.status])
        self.view = w.VBox([w.HBox([model_box, tile_box, run_box]), self.message,
                            self.confirm_button, self.plot.box, self.point, self.detail])
        if not known:
            self.message.value = error_html(
                f"unknown scheduler {self.base.scheduler!r}; valid ones: {', '.join(names)} "
                f"(the sweep uses {self.scheduler.value!r}: pick another in the list)")

    def points(self, confirmed: bool = False) -> list:
        """The grid the controls describe (ValueError with the bad value and the fix; more
        than ``sweep.size.MAX_POINTS`` points: ``TooBig`` unless ``confirmed``)."""
        model = {f: read_int(c) for f, c in self.model.items()}
        ncpu = read_int(self.ncpu, 1, self.max_workers)
        base = self.base.replace(**model, scheduler=self.scheduler.value, ncpu=ncpu)
        axes = parse_axes({f: c.value for f, c in self.tiles.items() if c.value.strip()})
        if not axes:
            raise ValueError("no tile sizes to vary: every tile box is empty; enter values "
                             "in one, e.g. inner_tile 256,512,1024")
        check_count(axes, base.to_dict(), confirmed)
        self._axes = [a for a, v in axes.items() if len(v) > 1] or list(axes)
        return grid(base, **axes)

    def show_point(self, index: int) -> None:
        """The Gantt chart (last measured step) and memory plot of point ``index``."""
        # loads the compiled extension: importing this module must not (--help, readers)
        from nntile_lab.trace import Trace, viz
        if self.df is None:
            raise ValueError("no sweep has finished yet: press Run sweep (or call run()) "
                             "first, then pick a point")
        if index not in self.df.index:
            raise ValueError(f"point {index!r} is not in the sweep: its points are "
                             f"{list(self.df.index)}")
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

    def _forget(self) -> None:
        super()._forget()
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


def _check_tiles(tiles) -> dict:
    """``tiles`` as given to TileSweep: None or a dict of tile fields → text; a TypeError
    or ValueError naming what is expected otherwise (a misspelt field is never dropped)."""
    if tiles is None:
        return {"inner_tile": "256,512,1024"}
    if not isinstance(tiles, dict):
        raise TypeError(f"TileSweep(tiles=...) takes a dict of tile field → values, e.g. "
                        f"{{'inner_tile': '256,512'}}; got {type(tiles).__name__} {tiles!r}")
    unknown = sorted(set(tiles) - set(TILE_FIELDS), key=str)
    if unknown:
        raise ValueError(f"TileSweep(tiles=...): unknown tile field(s) {unknown}; the tile "
                         f"fields are {', '.join(TILE_FIELDS)}")
    return {k: ",".join(map(str, v)) if isinstance(v, (list, tuple, range)) else v
            for k, v in tiles.items()}
