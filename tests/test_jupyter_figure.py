"""The library's figures show themselves in Jupyter and never change the process's
matplotlib backend (issue 19, item 1)."""
import base64
import os
import subprocess
import sys

import matplotlib
import pytest

from nntile_lab.interrupts import Interrupted
from nntile_lab.jupyter_figure import Figure, interactive, widget_backend_active

DRAWING_MODULES = ("nntile_lab.plots.paper", "nntile_lab.trace.viz", "nntile_lab.plots.sweep",
                   "nntile_lab.train.plots", "nntile_lab.plots.schedulers",
                   "nntile_lab.plots.depth",
                   "nntile_lab.proxies.collectives", "nntile_lab.proxies.extrapolate",
                   "nntile_lab.widgets")


def test_importing_and_drawing_keeps_the_users_backend(tmp_path):
    """A user's backend (here svg, as a notebook's inline one) survives importing every
    drawing module and drawing with the pyplot-based proxies' plots; the old code switched
    it to Agg."""
    code = f"""
import matplotlib
import importlib
for m in {DRAWING_MODULES!r}:
    importlib.import_module(m)
from nntile_lab.proxies import extrapolate
rows = [{{"link": "x", "nodes": n, "iteration_s": 1.0 / n, "exposed_s": 0.0 if n == 1 else 0.1}}
        for n in (1, 2, 4)]
extrapolate.plot(rows, {str(tmp_path / "x.png")!r})
print("backend", matplotlib.get_backend())
"""
    env = dict(os.environ, MPLBACKEND="svg")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "backend svg"
    assert (tmp_path / "x.png").read_bytes()[:4] == b"\x89PNG"


def test_extrapolation_plot_draws_no_zero_on_its_log_axis(tmp_path):
    """08's DLRM chart drew a 1-node "exposed" point at 1e-9 s; its legend now says which
    line is which."""
    from nntile_lab.proxies import extrapolate
    rows = [{"link": "x", "nodes": n, "iteration_s": 1.0 / n,
             "exposed_s": 0.0 if n == 1 else 0.1 * n} for n in (1, 2, 4)]
    captured = {}
    import matplotlib.pyplot as plt
    real = plt.close

    def keep(fig):
        captured["fig"] = fig
    plt.close = keep
    try:
        extrapolate.plot(rows, str(tmp_path / "x.png"))
    finally:
        plt.close = real
    fig = captured["fig"]
    ax = fig.axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [list(ln.get_xdata()) for ln in dashed] == [[2, 4]]
    assert ax.get_ylim()[0] > 1e-3
    legend = ax.get_legend() or fig.legends[0]    # under the axes, the figure's (08)
    labels = [t.get_text() for t in legend.get_texts()]
    assert "iteration" in labels and any(lab.startswith("exposed") for lab in labels)
    real(fig)


def test_a_figure_is_a_picture_or_under_widget_an_interactive_canvas():
    fig = Figure(figsize=(4, 3))
    fig.add_subplot().plot([1, 2])
    assert not widget_backend_active()
    data, meta = fig._repr_mimebundle_()
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert meta["image/png"] == {"width": 400, "height": 300}
    # as `%matplotlib widget` leaves it (dict access: reading rcParams["backend"] would
    # resolve the backend, the very side effect the library avoids)
    before = dict.__getitem__(matplotlib.rcParams, "backend")
    dict.__setitem__(matplotlib.rcParams, "backend", "module://ipympl.backend_nbagg")
    try:
        assert widget_backend_active()
        bundle = fig._repr_mimebundle_()
    finally:
        dict.__setitem__(matplotlib.rcParams, "backend", before)
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == fig.canvas.model_id and fig.canvas is interactive(fig)


def test_interrupted_is_a_keyboard_interrupt_shown_as_one_line():
    exc = Interrupted("sweep stopped after 1 of 3 points")
    assert isinstance(exc, KeyboardInterrupt) and exc.__notes__ == [str(exc)]
    assert exc._render_traceback_() == ["Interrupted: sweep stopped after 1 of 3 points"]
    with pytest.raises(KeyboardInterrupt, match="after 1 of 3"):
        raise exc


def test_an_interactive_canvas_leaves_the_backend_alone(tmp_path):
    """Importing ipympl calls matplotlib.use(ipympl) when matplotlib is loaded; the library
    makes its canvases without that switch (the user's inline backend stays)."""
    code = """
import matplotlib
import matplotlib.pyplot as plt
from nntile_lab.jupyter_figure import Figure, interactive
kept = plt.figure()                   # a figure of the user's
fig = Figure()
fig.add_subplot().plot([1, 2])
canvas = interactive(fig)
print(type(canvas).__module__, matplotlib.get_backend(), plt.fignum_exists(kept.number))
"""
    env = dict(os.environ, MPLBACKEND="svg")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ipympl.backend_nbagg", "svg", "True"]
