"""Pieces the widgets share: live plot areas, messages in the widgets' own words, CSS
class names."""
from __future__ import annotations

import html
import re

import ipywidgets as w
import pandas as pd

from nntile_lab.jupyter_figure import interactive, png_bytes
from nntile_lab.plots.sweep import ok_rows, varied
from nntile_lab.spec import field_names
from nntile_lab.sweep import run


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


class SweepView:
    """What the sweep widgets share: a Run button, a status label ("N points"), a message
    area, and ``run()``: points from the controls → ``sweep.run`` with a redraw after every
    point. Subclasses give ``points()``, ``_draw(df)`` and ``_best_text(df)``."""

    def _init_view(self, prefix: str, run_text: str, cache_dir, isolate, peak_gflops):
        self.cache_dir, self.isolate, self.peak_gflops = cache_dir, isolate, peak_gflops
        self.run_button = w.Button(description=run_text, button_style="primary", icon="play")
        self.run_button.add_class(f"{prefix}-run")
        self.run_button.on_click(lambda _: self.run())
        self.status = label(f"{prefix}-status", "0 points")
        self.message = label(f"{prefix}-message")
        self.df = None
        self.rows: list[dict] = []
        self._total = 0

    def _ipython_display_(self):
        # IPython: an optional heavy dependency, loaded where it is used
        from IPython.display import display
        display(self.view)

    def points(self) -> list:
        raise NotImplementedError

    def _draw(self, df) -> None:
        raise NotImplementedError

    def _best_text(self, df) -> str:
        raise NotImplementedError

    def _notes(self) -> list[str]:
        return []

    def _finished(self, df) -> None:
        """After a sweep (the tile widget fills its point picker here)."""

    def _started(self) -> None:
        """Before a sweep's first point: what showed the previous sweep goes (its plot is
        replaced at the first point; the tile widget empties its picker and detail)."""
        self.plot.say("running: the plot appears after the first point")

    def run(self):
        """The Run button: sweep, redrawing after each point; the rows, or None when the
        input is bad (the message says why). Interrupting keeps the finished points (they
        are cached: Run again resumes)."""
        self.message.value = ""
        try:
            pts = self.points()
        except ValueError as exc:
            self.message.value = error_html(str(exc))
            return None
        self.rows, self._total = [], len(pts)
        self._started()
        self.status.value = f"running: 0 of {len(pts)} points"
        self.run_button.disabled = True
        try:
            df = self._measure(pts)
        except KeyboardInterrupt:   # the sweep's Interrupted: one line in the cell
            self.status.value = (f"interrupted after {len(self.rows)} of {self._total} points"
                                 " (they are cached: Run resumes)")
            if not self.rows:
                self.plot.say("no plot: interrupted before the first point")
            raise
        except Exception as exc:          # shown in the widget, not lost in a log
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
            self.plot.say("no plot: the sweep failed (the error is above)")
            self.status.value = "failed"
            return None
        finally:
            self.run_button.disabled = False
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
