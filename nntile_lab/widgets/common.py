"""Pieces the widgets share: figures as PNG images, messages, CSS class names."""
from __future__ import annotations

import html
import io

import ipywidgets as w
import pandas as pd

from nntile_lab.sweep import run
from nntile_lab.sweep.plots import varied


def png(fig, dpi: int = 80) -> bytes:
    """A matplotlib Figure as PNG bytes (an Image widget shows them in any front end)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def image(cls: str) -> w.Image:
    img = w.Image(format="png", layout=w.Layout(max_width="100%"))
    img.add_class(cls)
    return img


def label(cls: str, text: str = "") -> w.HTML:
    out = w.HTML(text)
    out.add_class(cls)
    return out


def error_html(text: str) -> str:
    return ('<div style="color:#b00020;white-space:pre-wrap"><b>Error:</b> '
            f"{html.escape(text)}</div>")


def notice_html(lines) -> str:
    items = "".join(f"<li>{html.escape(str(x))}</li>" for x in lines)
    return f'<ul style="color:#8a5a00;margin:0">{items}</ul>' if items else ""


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
        self.status.value = f"running: 0 of {len(pts)} points"
        self.run_button.disabled = True
        try:
            df = run(pts, self.cache_dir, isolate=self.isolate, progress=False,
                     on_point=self._on_point, peak_gflops=self.peak_gflops)
        except KeyboardInterrupt:
            self.status.value = (f"interrupted after {len(self.rows)} of {self._total} points"
                                 " (they are cached: Run resumes)")
            raise
        except Exception as exc:          # shown in the widget, not lost in a log
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
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

    def _on_point(self, row: dict) -> None:
        self.rows.append(row)
        self.status.value = f"running: {len(self.rows)} of {self._total} points"
        self._draw(pd.DataFrame.from_records(self.rows))
