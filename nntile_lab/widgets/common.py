"""Pieces the widgets share: live plot areas, messages in the widgets' own words, CSS
class names."""
from __future__ import annotations

import html
import re
import threading

import ipywidgets as w
import pandas as pd

from nntile_lab.interrupts import stoppable
from nntile_lab.jupyter_figure import interactive, png_bytes
from nntile_lab.plots.sweep import ok_rows, varied
from nntile_lab.spec import ExperimentSpec, field_names
from nntile_lab.sweep import run
from nntile_lab.sweep.size import MAX_POINTS, duration_text, estimate_s, point_count
from nntile_lab.widgets.background import Background, BackgroundButtons


class PlotArea:
    """One plot of a widget, replaced whole whenever its data changes (never a previous
    result under a new one): ``show(fig)`` puts the figure there as an interactive ipympl
    canvas (zoom, pan, hover), ``say(text)`` a sentence instead of empty axes (an empty
    or failed result), ``clear()`` nothing.

    ``box`` is the ipywidget to lay out: an ``Output`` whose one output is the widget shown
    (``shown``: the canvas, the sentence's HTML, or None). An Output, not a Box: JupyterLab
    disposes an Output's old views when its outputs change, while an ipympl view taken out
    of a Box's children stays on the page. ``figure`` is the figure shown now (None when it
    shows words or nothing)."""

    def __init__(self, cls: str):
        self.box = w.Output(layout=w.Layout(width="100%"))
        self.box.add_class(cls)
        self.cls = cls
        self.shown = self.figure = None
        self.text = ""

    def show(self, fig) -> None:
        try:
            canvas = interactive(fig)
        except ImportError:            # no ipympl: a picture at the figure's size
            canvas = w.Image(value=png_bytes(fig, 200), format="png",
                             width=round(fig.get_figwidth() * 100))
        canvas.add_class(f"{self.cls}-canvas")
        self._replace(canvas, fig, "")

    def say(self, text: str) -> None:
        self._replace(label(f"{self.cls}-words", f"<i>{html.escape(text)}</i>"), None, text)

    def clear(self) -> None:
        self._replace(None, None, "")

    def _replace(self, widget, fig, text: str) -> None:
        old = self.shown
        self.shown, self.figure, self.text = widget, fig, text   # set before observers run
        self.box.outputs = () if widget is None else ({
            "output_type": "display_data", "metadata": {},
            "data": {"text/plain": text or repr(fig),
                     "application/vnd.jupyter.widget-view+json": {
                         "version_major": 2, "version_minor": 0,
                         "model_id": widget.model_id}}},)
        if old is not None:            # its view left with the output: free its comms
            toolbar = getattr(old, "toolbar", None)    # an ipympl canvas's own widget
            old.close()
            if toolbar is not None:
                toolbar.close()


def label(cls: str, text: str = "") -> w.HTML:
    out = w.HTML(text)
    out.add_class(cls)
    return out


def error_html(text: str) -> str:
    return ('<div style="color:#b00020;white-space:pre-wrap"><b>Error:</b> '
            f"{html.escape(widget_words(text))}</div>")


def notice_html(lines) -> str:
    items = "".join(f"<li>{html.escape(widget_words(str(x)))}</li>" for x in lines)
    return f'<ul style="color:#8a5a00;margin:0">{items}</ul>' if items else ""


def widget_words(text: str) -> str:
    """A message of the library in the widgets' words: their fields are labelled with the
    spec's names (``inner_tile``), not the CLI's flags (``--inner-tile``)."""
    fields = set(field_names())
    text = re.sub(r" \(--[a-z0-9-]+\)", "", text)    # "x=0 (--x) must …" → "x=0 must …"
    text = text.replace("--no-priorities", "priorities=False")
    return re.sub(r"--([a-z][a-z0-9-]*)",
                  lambda m: m.group(1).replace("-", "_")
                  if m.group(1).replace("-", "_") in fields else m.group(0), text)


def failures(df) -> list[str]:
    """One line per failed point: its varied values and the error."""
    names = varied(df)
    bad = df[df["error"].notna()]
    return [(", ".join(f"{n}={r[n]}" for n in names) or "point") + f": {r['error']}"
            for _, r in bad.iterrows()]


# Test policies, not schedulers for real work: never offered in a widget's list.
NOT_APPLICABLE = ("graph_test",)


def applicable_schedulers() -> list[str]:
    """Every scheduling policy of this StarPU build that applies to a real run."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import scheduler_names
    return [s for s in scheduler_names() if s not in NOT_APPLICABLE]


def check_base(widget: str, base) -> ExperimentSpec:
    """A widget's ``base``: an ExperimentSpec, or None for the default one; a TypeError
    naming what is expected otherwise."""
    if base is None:
        return ExperimentSpec()
    if not isinstance(base, ExperimentSpec):
        hint = (": ExperimentSpec(**d) makes one from a dict" if isinstance(base, dict)
                else "")
        raise TypeError(f"{widget}(base=...) takes an ExperimentSpec (or None for the "
                        f"default model), e.g. ExperimentSpec(n_layer=2, n_embd=256); got "
                        f"{type(base).__name__} {base!r}{hint}")
    return base


def int_box(description: str, value, cls: str = "", width: str = "190px",
            label_width: str | None = None) -> w.Text:
    """A box for a whole number that shows what was typed (ipywidgets' IntText turns
    ``2.5`` into ``25`` in the browser and a BoundedIntText clamps silently): ``read_int``
    refuses anything but an integer, naming the field."""
    box = w.Text(value=str(value), description=description, layout=w.Layout(width=width),
                 style={"description_width": label_width} if label_width else {})
    if cls:
        box.add_class(cls)
    return box


def read_int(box: w.Text, lo: int | None = None, hi: int | None = None) -> int:
    """The integer in ``box``; ValueError naming its field, the text and the range."""
    text = box.value.strip()
    span = ("" if lo is None and hi is None else
            f" from {lo} to {hi}" if lo is not None and hi is not None else
            f" ≥ {lo}" if lo is not None else f" ≤ {hi}")
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{box.description}={text!r} is not a whole number: enter an "
                         f"integer{span}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{box.description}={value} is out of range: enter an "
                         f"integer{span}")
    return value


class TooBig(ValueError):
    """A sweep of more points than ``sweep.size.MAX_POINTS``: it runs once confirmed."""

    def __init__(self, n: int, axes: dict, base_values: dict):
        sizes = " × ".join(f"{k} {len(v)}" for k, v in axes.items() if len(v) > 1)
        self.n = n
        super().__init__(
            f"this sweep has {n:,} points ({sizes}), about "
            f"{duration_text(estimate_s(n, base_values))} of measuring: more than "
            f"{MAX_POINTS}. Narrow the ranges (low:high:step with a larger step), or press "
            f"“Run all {n:,} points” to run it anyway")


def check_count(axes: dict, base_values: dict, confirmed: bool) -> None:
    """TooBig when the grid of ``axes`` exceeds ``MAX_POINTS`` and is not ``confirmed``
    (the command line's ``--yes``)."""
    n = point_count(axes)
    if n > MAX_POINTS and not confirmed:
        raise TooBig(n, axes, base_values)


class SweepView(BackgroundButtons):
    """What the sweep widgets share: Run and Stop buttons, a status label ("N points"), a
    message area, and ``run()``: points from the controls → ``sweep.run`` with a redraw
    after every point. Subclasses give ``points(confirmed)``, ``_draw(df)``,
    ``_best_text(df)`` and ``_forget()`` (what shows a sweep's results, emptied).

    The Run button starts ``run()`` in a thread of its own (widgets/background.py: why);
    Stop, or Kernel → Interrupt, ends it within a second or two, keeping the finished
    points (cached: Run resumes). ``run()`` called from a cell or a script runs here."""

    def _init_view(self, prefix: str, run_text: str, cache_dir, isolate, peak_gflops):
        self.cache_dir, self.isolate, self.peak_gflops = cache_dir, isolate, peak_gflops
        self.background = Background()
        self.run_button = w.Button(description=run_text, button_style="primary", icon="play")
        self.run_button.add_class(f"{prefix}-run")
        self.run_button.on_click(lambda _: self.start())
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True,
                                    tooltip="stop after the running point (Kernel → "
                                            "Interrupt does the same)")
        self.stop_button.add_class(f"{prefix}-stop")
        self.stop_button.on_click(lambda _: self.stop())
        self.confirm_button = w.Button(button_style="warning",
                                       layout=w.Layout(display="none", width="auto"))
        self.confirm_button.add_class(f"{prefix}-confirm")
        self.confirm_button.on_click(lambda _: self.start(confirmed=True))
        self.status = label(f"{prefix}-status", "0 points")
        self.message = label(f"{prefix}-message")
        self.df = None
        self.rows: list[dict] = []
        self._total = 0

    def _ipython_display_(self):
        # IPython: an optional heavy dependency, loaded where it is used
        from IPython.display import display
        display(self.view)

    def points(self, confirmed: bool = False) -> list:
        raise NotImplementedError

    def _draw(self, df) -> None:
        raise NotImplementedError

    def _best_text(self, df) -> str:
        raise NotImplementedError

    def _notes(self) -> list[str]:
        return []

    def _finished(self, df) -> None:
        """After a sweep (the tile widget fills its point picker here)."""

    def _forget(self) -> None:
        """Empty whatever shows a sweep's results (plots, the tile widget's picker and
        detail): a new sweep starts, or the controls hold an error."""
        self.df = None
        self.plot.clear()

    def _started(self) -> None:
        """Before a sweep's first point: what showed the previous sweep goes."""
        self._forget()
        self.plot.say("running: the plot appears after the first point")

    # ---- the buttons ---------------------------------------------------------------
    def start(self, confirmed: bool = False) -> bool:
        """The Run button: ``run()`` in the background (False if one runs already)."""
        return self.background.start(lambda: self.run(confirmed))


    # ---- the sweep -----------------------------------------------------------------
    def run(self, confirmed: bool = False):
        """Sweep, redrawing after each point; the rows, or None when the input is bad (the
        message says why, and what showed an earlier sweep is gone). More than
        ``MAX_POINTS`` points run only ``confirmed`` (the "Run all N points" button).
        Interrupting keeps the finished points (they are cached: Run again resumes)."""
        if threading.current_thread() is self.background.thread:
            return self._run(confirmed, self.background.token)
        if self.running:
            raise RuntimeError("a sweep of this widget is running: stop() it or wait() for "
                               "it first")
        with stoppable() as token:
            self.background.token = token     # the Stop button stops this run too
            return self._run(confirmed, token)

    def _run(self, confirmed: bool, token):
        self.message.value = ""
        self.confirm_button.layout.display = "none"
        try:
            pts = self.points(confirmed)
        except ValueError as exc:
            # nothing of an earlier sweep stays beside an error: it would read as this
            # input's result
            self._forget()
            self.status.value = "not run: the values have an error (below)"
            self.message.value = error_html(str(exc))
            if isinstance(exc, TooBig):
                self.status.value = f"not run: {exc.n:,} points need confirming (below)"
                self.confirm_button.description = f"Run all {exc.n:,} points"
                self.confirm_button.layout.display = None
            return None
        self.rows, self._total = [], len(pts)
        self._started()
        self.status.value = f"running: 0 of {len(pts)} points"
        self.run_button.disabled, self.stop_button.disabled = True, False
        try:
            df = self._measure(pts)
        except KeyboardInterrupt:   # the sweep's Interrupted: one line in the cell
            how = "stopped" if token.reason.startswith("stopped") else "interrupted"
            self.status.value = (f"{how} after {len(self.rows)} of {self._total} points"
                                 " (they are cached: Run resumes)")
            if not self.rows:
                self.plot.say(f"no plot: {how} before the first point")
            raise
        except Exception as exc:          # shown in the widget, not lost in a log
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
            self.plot.say("no plot: the sweep failed (the error is above)")
            self.status.value = "failed"
            return None
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
        self.df = df
        self.message.value = notice_html([*df.attrs.get("messages", []), *self._notes(),
                                          *failures(df)])
        self._draw(df)
        self._finished(df)
        # last: "done" is the signal that plot, picker and messages are the new sweep's (a
        # browser reading them on seeing "done" must not catch the previous sweep's)
        self.status.value = f"done: {len(df)} points" + self._best_text(df)
        return df

    def _measure(self, pts):
        """The sweep itself (``sweep.run``), redrawing after each point."""
        return run(pts, self.cache_dir, isolate=self.isolate, progress=False,
                   on_point=self._on_point, peak_gflops=self.peak_gflops)

    def _nothing_ran(self, df) -> bool:
        """Words instead of a plot when no point of ``df`` has a measurement."""
        if len(ok_rows(df)):
            return False
        done = self.df is not None and len(self.df) == len(df)
        self.plot.say(f"no plot: none of the {len(df)} points ran ("
                      + ("the messages above say why)" if done else
                         "their errors are listed when the sweep ends)"))
        return True

    def _on_point(self, row: dict) -> None:
        self.rows.append(row)
        self.status.value = f"running: {len(self.rows)} of {self._total} points"
        self._draw(pd.DataFrame.from_records(self.rows))
