"""The tile-size sweep widget: which tile sizes make this model train fastest here?

Controls: the size of the base spec's model (any registered model: ``base.model`` is
"gpt2", "llama" or a user's; n_layer, n_head, n_embd, vocab_size, seq_len, batch), one text
box per tile field taking a comma list (``256,512``), an inclusive range
(``128:1024:128``) or nothing (the default tile), the scheduler and the worker count; the
Run button sweeps the grid with ``nntile_lab.sweep.run`` (cached, a subprocess per point)
and redraws the GFLOP/s / step-time plot after every point, the best point starred.
Picking a point shows its Gantt chart and memory plot (each point keeps its trace); a new
sweep empties the picker and that detail first (never a previous point under a new plot).
Plots are live ipympl canvases (zoom, pan; the Gantt chart names the task under the cursor).
Messages use the fields' names (``inner_tile``), not the CLI's flags.

Each measured point shows its predicted GFLOP/s beside it (hollow markers): the prediction
``nntile_lab.tune`` makes for it from the points measured before it (its per-codelet models
learn from each point's trace). "Find the best tiles" runs ``tune`` instead, within the
budget box's time: the tile boxes given are its grid (empty ones the tuner's to choose), the
plot shows measured against predicted as it runs, and it ends with the chosen tiling, its
GFLOP/s and the command line that trains with it.

The Run button runs the sweep in a thread of its own; Stop or Kernel → Interrupt end it
within a second or two (widgets/background.py). An input error empties what showed the
previous sweep; number boxes refuse what is not a whole number; more than 500 points wait
for the "Run all N points" button (docs/jupyter.md, "The contract").

A thin view: ``points()``, ``run()``, ``start()``/``stop()`` and ``show_point(i)`` are the
callbacks, plain methods that tests call without a browser (``find_best()`` and
``start_tune()``: the tune button's). DOM classes: nl-sweep-run, -stop, -confirm, -tune,
-budget, -status, -message, -plot, -point, -detail, -gantt, -memory (each plot's canvas:
<class>-canvas; a sentence in a plot's place: <class>-words).
"""
from __future__ import annotations

import html
import os
import threading

import ipywidgets as w

from nntile_lab.interrupts import stoppable
from nntile_lab.plots.sweep import best, tile_figure
from nntile_lab.spec import TILE_FIELDS, ExperimentSpec, field_names
from nntile_lab.sweep import grid, parse_axes, run
from nntile_lab.widgets.common import (
    PlotArea,
    SweepView,
    applicable_schedulers,
    check_base,
    check_count,
    error_html,
    int_box,
    notice_html,
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
        # the spec's model (any registered one: gpt2, llama, a user's) is the base's
        model_box = w.VBox([w.HTML(f"<b>model</b> {html.escape(self.base.model)}"),
                            *self.model.values()])
        tile_box = w.VBox([w.HTML("<b>tile sizes</b> (a,b,c or low:high:step; empty = "
                                  "default)"), *self.tiles.values()])
        self.budget = w.Text(value="3m", description="budget", layout=w.Layout(width="190px"),
                             tooltip="the tune's wall time: seconds, or 90s, 3m, 1h")
        self.budget.add_class("nl-sweep-budget")
        self.tune_button = w.Button(description="Find the best tiles", icon="magic",
                                    tooltip="tune: predict every tiling, measure the best "
                                            "predicted, within the budget")
        self.tune_button.add_class("nl-sweep-tune")
        self.tune_button.on_click(lambda _: self.start_tune())
        self.tuned = None
        run_box = w.VBox([w.HTML("<b>runtime</b>"), self.scheduler, self.ncpu,
                          w.HBox([self.run_button, self.stop_button]),
                          w.HBox([self.tune_button, self.budget]), self.status])
        self.view = w.VBox([w.HBox([model_box, tile_box, run_box]), self.message,
                            self.confirm_button, self.plot.box, self.point, self.detail])
        if not known:
            self.message.value = error_html(
                f"unknown scheduler {self.base.scheduler!r}; valid ones: {', '.join(names)} "
                f"(the sweep uses {self.scheduler.value!r}: pick another in the list)")

    def _base_and_axes(self):
        """The spec the model and runtime controls give, and the tile boxes' values."""
        model = {f: read_int(c) for f, c in self.model.items()}
        ncpu = read_int(self.ncpu, 1, self.max_workers)
        base = self.base.replace(**model, scheduler=self.scheduler.value, ncpu=ncpu)
        axes = parse_axes({f: c.value for f, c in self.tiles.items() if c.value.strip()})
        return base, axes

    def points(self, confirmed: bool = False) -> list:
        """The grid the controls describe (ValueError with the bad value and the fix; more
        than ``sweep.size.MAX_POINTS`` points: ``TooBig`` unless ``confirmed``)."""
        base, axes = self._base_and_axes()
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
        self.plot.show(tile_figure(df, x=x, title=f"Tile sweep of {self.base.model}"))

    # ---- predicted beside measured -------------------------------------------------
    def _measure(self, pts):
        """The sweep (``sweep.run``), each point's prediction made before it counts."""
        self.predictor = None
        return run(pts, self.cache_dir, isolate=self.isolate, progress=False,
                   on_point=self._predicted, peak_gflops=self.peak_gflops)

    def _predicted(self, row: dict) -> None:
        """A measured point: what ``tune`` predicted for it from the points before, then
        what it learns from its trace. A prediction that fails never ends the sweep."""
        row["predicted_gflops"] = None
        if row["status"] == "fits":
            try:
                row["predicted_gflops"] = self._predict_and_learn(row)
            except Exception as exc:   # said once, under the plot; the sweep goes on
                self.prediction_error = f"{type(exc).__name__}: {exc}"
        self._on_point(row)

    def _predict_and_learn(self, row: dict) -> float:
        # the predictor's dry runs and the trace reader: loaded where a sweep runs
        from nntile_lab import sgemm_peak
        from nntile_lab.trace import Trace
        from nntile_lab.tune.predict import Predictor, workers_of
        spec = ExperimentSpec.from_dict({f: row[f] for f in field_names()})
        if self.predictor is None:
            peak = self.peak_gflops or sgemm_peak.gflops()
            self.predictor = Predictor(peak / max(1, workers_of(spec)))
        pred = self.predictor.predict(spec)
        tasks = Trace.load(row["trace_dir"]).tasks if row["trace_dir"] else None
        if tasks is not None:
            self.predictor.learn(spec, tasks, row["step_time_s"])
        return spec.flops_per_step() / pred.step_s / 1e9

    def _notes(self) -> list[str]:
        err = getattr(self, "prediction_error", None)
        return [f"no predictions beside the points: {err}"] if err else []

    # ---- Find the best tiles -------------------------------------------------------
    def start_tune(self) -> bool:
        """The tune button: ``find_best()`` in the background (False if one runs)."""
        return self.background.start(self.find_best)

    def find_best(self):
        """Tune the tiles the controls leave open (the tile boxes given are its grid)
        within the budget box's time; the ``TuneResult``, or None when the input is bad
        (the message says why). Stop, or Kernel → Interrupt, ends it keeping the measured
        points."""
        if threading.current_thread() is self.background.thread:
            return self._find_best()
        if self.running:
            raise RuntimeError("an action of this widget is running: stop() it or wait() "
                               "for it first")
        with stoppable() as token:
            self.background.token = token     # the Stop button stops this run too
            return self._find_best()

    def _find_best(self):
        # the tuner loads the measuring stack: where it is used
        from nntile_lab.plots.tune import figure
        from nntile_lab.tune import tune
        self.message.value = ""
        try:
            base, axes = self._base_and_axes()
        except ValueError as exc:
            self._forget()
            self.status.value = "not run: the values have an error (below)"
            self.message.value = error_html(str(exc))
            return None
        self._started()
        self.status.value = f"tuning within {self.budget.value.strip()}"
        self.run_button.disabled = self.tune_button.disabled = True
        self.stop_button.disabled = False

        def show(table):
            axes_shown = [a for a in TILE_FIELDS if table[a].nunique() > 1]
            self.plot.show(figure(table, axes_shown, title="Find the best tiles: measured "
                                  "against predicted"))
            n = int(table["measured_step_s"].notna().sum())
            self.status.value = f"tuning: {n} points measured"
        try:
            res = tune(base, self.budget.value.strip(), axes=axes, cache_dir=self.cache_dir,
                       progress=False, isolate=self.isolate, peak_gflops=self.peak_gflops,
                       on_point=show)
        except KeyboardInterrupt:
            self.status.value = ("stopped: the measured points are kept (Find the best "
                                 "tiles resumes from them)")
            raise
        except ValueError as exc:       # UsageError: the budget, nothing fits, nothing to vary
            self.plot.say("no plot: nothing was measured (the reason is above)")
            self.status.value = "not run"
            self.message.value = error_html(str(exc))
            return None
        except Exception as exc:
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
            self.status.value = "failed"
            return None
        finally:
            self.run_button.disabled = self.tune_button.disabled = False
            self.stop_button.disabled = True
        self.tuned = res
        if res.best is not None:
            show(res.table)
        self.message.value = notice_html([res.report(), *res.messages])
        self.status.value = ("done: " + (res.report().splitlines()[0] if res.best is not None
                                         else "no candidate was measured"))
        return res

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
