"""A matplotlib Figure that shows itself in Jupyter, whatever the user imported before.

A bare ``matplotlib.figure.Figure`` as a cell's last expression displays as text
(``<Figure size 1200x380 with 1 Axes>``) in a fresh ipykernel: the PNG formatter exists only
once the inline backend is active. Every figure the library returns is this subclass: it
carries its own display (``_repr_mimebundle_``), so the library never needs to change the
process's matplotlib backend.

- under ``%matplotlib widget`` (ipympl) the figure displays as an interactive canvas (zoom,
  pan, the task under the cursor in the status line; see ``interactive``);
- otherwise as a PNG drawn at twice its size and shown at its size (sharp on HiDPI screens,
  never stretched past its natural width).

``fig.savefig(path)`` works as for any Figure (Agg draws it; no window, no pyplot state).
"""
from __future__ import annotations

import base64
import io
import os
import sys
import tempfile
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure as _MplFigure

# the PNG a notebook receives: 2 device pixels per CSS pixel, at 100 CSS pixels per inch
CSS_DPI = 100
PIXEL_RATIO = 2
# an ipympl canvas is shown at its size, never scaled down: the library's figures are at
# most WIDTH inches wide (900 CSS px fit JupyterLab's output area at 1400 px with the side
# bar open)
WIDTH = 9.0
WIDGET_BACKENDS = ("module://ipympl.backend_nbagg", "widget", "ipympl")


def widget_backend_active() -> bool:
    """Whether the user chose ipympl (``%matplotlib widget``); reads the setting without
    resolving (and so without changing) the process's backend."""
    backend = dict.__getitem__(matplotlib.rcParams, "backend")   # no resolution
    return isinstance(backend, str) and backend.lower() in WIDGET_BACKENDS


def png_bytes(fig: _MplFigure, dpi: float) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def interactive(fig: _MplFigure):
    """The figure's ipympl canvas (an ipywidget: zoom, pan, hover), made once per figure.

    Needs ipympl (the ``jupyter`` extra); raises ImportError naming it otherwise."""
    try:
        Canvas, FigureManager = ipympl_classes()
    except ImportError as exc:
        raise ImportError(f"interactive plots need ipympl ({exc}): pip install ipympl, or "
                          "pip install 'nntile_lab[jupyter]'") from exc
    if not isinstance(fig.canvas, Canvas):
        canvas = Canvas(fig)
        FigureManager(canvas, 0)    # the toolbar and the front end's messages
        canvas.header_visible = False    # the figure's own title says what it is
        # the toolbar lies over the plot's left edge: shown only while the pointer is over
        # the figure, so that it never hides the worker names
        canvas.toolbar_position = "left"
        canvas.toolbar_visible = "fade-in-fade-out"
    return fig.canvas


def ipympl_classes():
    """ipympl's canvas and manager classes, imported without its side effect: importing the
    ``ipympl`` package selects its own backend (``module://ipympl.backend_nbagg``) when
    matplotlib is loaded, which would switch the user's backend (and, with pyplot loaded,
    close their figures). ``matplotlib.use`` is a no-op for the length of that import."""
    if "ipympl.backend_nbagg" not in sys.modules:
        use = matplotlib.use
        matplotlib.use = lambda *args, **kwargs: None
        try:
            import ipympl.backend_nbagg  # noqa: F401  (optional: the jupyter extra)
        finally:
            matplotlib.use = use
    from ipympl.backend_nbagg import Canvas, FigureManager  # loaded above, without use()
    return Canvas, FigureManager


def save_figure(fig: _MplFigure, path, dpi: float = 110, format: str | None = None) -> Path:
    """Write ``fig`` to ``path`` atomically (a temporary file in the same folder, then a
    rename: never a half-written image), in ``format`` (default: the path's suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format=format or path.suffix.lstrip(".") or "png")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


class Figure(_MplFigure):
    """``matplotlib.figure.Figure`` with a Jupyter display of its own (module docstring)."""

    def _repr_mimebundle_(self, include=None, exclude=None):
        if widget_backend_active():
            try:
                return interactive(self)._repr_mimebundle_()
            except ImportError:
                pass            # the user chose a backend we cannot use: a picture then
        data = png_bytes(self, CSS_DPI * PIXEL_RATIO)
        width, height = self.get_size_inches() * CSS_DPI
        return ({"image/png": base64.b64encode(data).decode("ascii"),
                 "text/plain": repr(self)},
                {"image/png": {"width": round(width), "height": round(height)}})
