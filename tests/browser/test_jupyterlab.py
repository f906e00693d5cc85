"""The widget notebooks in a real browser: JupyterLab (headless, loopback, token) and Debian's
Chromium driven by Playwright run a notebook and use its widget as a person would — the tile
sweep (Run, a point's detail, a new sweep that must not show the old point, a bad tile said in
words and in the field's own name) and the trace explorer (an empty slice said in words, a
zoom into the Gantt chart that changes the range shown, the task under the cursor named);
screenshots are kept.

Never skipped: without Chromium or Playwright the test fails and says how to install them
(`scripts/setup.sh test` does). Every wait has a timeout, and the server and browser are
stopped whatever happens.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.jupyter_kernel import NOTEBOOKS, write_kernel_spec

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
NOTEBOOK = "03_tile_sweep.ipynb"
SERVER_START_S = 90
NOTEBOOK_RUN_S = 420   # every cell, the sweep included, at smoke size on a loaded 2-core machine
SWEEP_S = 300          # the sweep started by the Run button
STEP_S = 90            # any single UI wait
KERNEL_START_S = 180   # a kernel start (imports numpy, pandas, matplotlib) on a loaded machine


def _require_browser():
    """Fail (never skip) with the fix when the browser stack is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"Playwright is not installed ({exc}): run `scripts/setup.sh test` "
                    "(pip install playwright; the browser is Debian's chromium, never "
                    "`playwright install`)", pytrace=False)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (scripts/setup.sh "
                    "test installs it)", pytrace=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s:\n"
                f"{log.read_text()[-3000:]}")


@contextlib.contextmanager
def jupyterlab(root: Path, state: Path):
    """A JupyterLab server on 127.0.0.1 (random free port, token auth) serving ``root``, its
    configuration and kernels under ``state``; yields (base url, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update(JUPYTER_PATH=str(write_kernel_spec(state / "data")),
               JUPYTER_CONFIG_DIR=str(state / "config"),
               JUPYTER_RUNTIME_DIR=str(state / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
               JUPYTER_PLATFORM_DIRS="1")
    # user settings: render every cell (no virtual scrolling: the screenshot shows the plot)
    # and no "news?" prompt over the page
    settings = state / "settings"
    for name, value in (("notebook-extension/tracker", {"windowingMode": "none"}),
                        ("apputils-extension/notification", {"fetchNews": "false"})):
        f = settings / "@jupyterlab" / f"{name}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value))
    env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    log = state / "server.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--port-retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--allow-root", "--LabApp.news_url=None",
           "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_server(f"{base}/api/status?token={token}", proc, log)
        yield base, token
    finally:
        # SIGTERM: the server shuts its kernels down; then its whole process group
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def notebook_page(tmp_path: Path, notebook: str, shot: Path, run_all: bool = True):
    """JupyterLab on a copy of ``notebook`` in Chromium, every cell run (unless not
    ``run_all``); yields the page. On a failure: a screenshot at ``shot`` and the end of the
    server's log."""
    _require_browser()
    from playwright.sync_api import sync_playwright
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    shutil.copy(NOTEBOOKS / notebook, root / notebook)
    with jupyterlab(root, state) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     timeout=STEP_S * 1000)
        page = None
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(STEP_S * 1000)
            page.goto(f"{base}/lab/tree/{notebook}?token={token}")
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
            # the kernel is up when the toolbar's kernel status reads Idle
            page.wait_for_function(
                "() => { const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
                " return !!(w && w.sessionContext && w.sessionContext.session &&"
                " w.sessionContext.session.kernel &&"
                " w.sessionContext.session.kernel.status === 'idle'); }",
                timeout=KERNEL_START_S * 1000)
            if run_all:
                page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            yield page
        except Exception:
            if page is not None:
                with contextlib.suppress(Exception):
                    page.screenshot(path=str(shot))
            log = (state / "server.log").read_text(errors="replace")[-4000:]
            print(f"screenshot of the failure: {shot}\nJupyterLab's log (end):\n{log}")
            raise
        finally:
            browser.close()


def _painted(page) -> None:
    page.evaluate("() => new Promise(r => requestAnimationFrame("
                  "() => requestAnimationFrame(r)))")


def _canvas_box(page, widget_cls: str):
    """The drawn canvas of the ipympl plot whose widget has class ``widget_cls``."""
    canvas = page.locator(f".{widget_cls} .jupyter-matplotlib-canvas-div canvas").first
    canvas.wait_for()
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100, box
    return canvas, box


def _swept_widget(page):
    """03's tile sweep widget, once the notebook's own sweep is done (its last cell prints
    the best point)."""
    page.locator(".jp-OutputArea-output pre", has_text="best inner_tile =").wait_for(
        timeout=NOTEBOOK_RUN_S * 1000)
    return page.locator(".jp-OutputArea-output", has=page.locator(".nl-sweep-run")).first


def test_tile_sweep_widget_in_chromium(tmp_path):
    from playwright.sync_api import expect
    shot = tmp_path / "tile_sweep.png"
    with notebook_page(tmp_path, NOTEBOOK, shot) as page:
        widget = _swept_widget(page)
        status = widget.locator(".nl-sweep-status")
        # a point's detail: its Gantt chart and memory plot, live canvases
        widget.locator(".nl-sweep-point select").select_option(index=1)
        _canvas_box(page, "nl-sweep-gantt-canvas")
        expect(widget.locator(".nl-sweep-memory-canvas")).to_have_count(1)
        # two tile sizes, one new (not in the notebook's cache): the button measures it
        tiles = widget.locator(".widget-text", has_text="inner_tile").locator("input")
        tiles.fill("96,128")
        tiles.press("Enter")
        widget.locator("button.nl-sweep-run").click()
        status.get_by_text("done: 2 points").wait_for(timeout=SWEEP_S * 1000)
        # one picker entry per point on the plot, the new sweep's, and no old detail (the
        # widget sets the status last; the browser may still be applying updates: retry)
        picker = widget.locator(".nl-sweep-point select option")
        expect(picker).to_have_text(["inner_tile=96", "inner_tile=128"],
                                    timeout=STEP_S * 1000)
        expect(widget.locator(".nl-sweep-gantt-canvas")).to_have_count(0)
        expect(widget.locator(".nl-sweep-memory-canvas")).to_have_count(0)
        canvas, box = _canvas_box(page, "nl-sweep-plot-canvas")
        # drawn for the screen's pixels, not stretched: the canvas's pixels per CSS pixel
        ratio = page.evaluate("c => c.width / c.getBoundingClientRect().width",
                              canvas.element_handle())
        assert abs(ratio - page.evaluate("window.devicePixelRatio")) < 0.05, ratio
        _painted(page)
        widget.screenshot(path=str(shot))  # picker, Run, status, plot
        # a bad tile: the message names the field as labelled, the plot is words, not axes
        tiles.fill("0")
        tiles.press("Enter")
        widget.locator("button.nl-sweep-run").click()
        status.get_by_text("done: 1 points, none ran").wait_for(timeout=SWEEP_S * 1000)
        message = widget.locator(".nl-sweep-message")
        expect(message).to_contain_text("inner_tile=0 must be from 1")
        assert "--inner-tile" not in message.inner_text()
        expect(widget.locator(".nl-sweep-plot-words")).to_contain_text(
            "none of the 1 points ran")
        expect(widget.locator(".nl-sweep-plot-canvas")).to_have_count(0)
        _painted(page)
        widget.screenshot(path=str(tmp_path / "tile_sweep_bad_tile.png"))
    print(f"screenshots: {shot}, {tmp_path / 'tile_sweep_bad_tile.png'}")
    assert shot.stat().st_size > 10_000


def _range(page) -> tuple[float, float]:
    text = page.locator(".nl-trace-range").first.inner_text()
    lo, hi = text.removeprefix("showing ").removesuffix(" ms").split("–")
    return float(lo), float(hi)


def test_trace_explorer_zoom_hover_and_empty_slice_in_chromium(tmp_path):
    from playwright.sync_api import expect
    shot = tmp_path / "trace_explorer.png"
    with notebook_page(tmp_path, "05_trace_explorer.ipynb", shot) as page:
        table = page.locator(".nl-trace-table").first
        table.wait_for(timeout=NOTEBOOK_RUN_S * 1000)
        expect(table).to_contain_text("(whole trace)", timeout=NOTEBOOK_RUN_S * 1000)
        # an empty slice (optimizer tasks belong to no layer): words, never the last plot
        page.locator(".nl-trace-layer select").select_option(label="0")
        page.locator(".nl-trace-phase select").select_option(label="optimizer")
        expect(table).to_contain_text("no task in this slice (layer 0, optimizer)")
        expect(page.locator(".nl-trace-plot-words")).to_contain_text("no task in this slice")
        expect(page.locator(".nl-trace-plot-canvas")).to_have_count(0)
        # a step and a phase with tasks: the table names the slice, the chart is back
        page.locator(".nl-trace-step select").select_option(index=1)
        page.locator(".nl-trace-phase select").select_option(label="forward")
        expect(table).to_contain_text(", layer 0, forward)")
        canvas, box = _canvas_box(page, "nl-trace-plot-canvas")
        expect(page.locator(".nl-trace-range")).to_contain_text("showing")
        lo, hi = _range(page)
        x0, y0, w, h = box["x"], box["y"], box["width"], box["height"]
        # hover: the status line names the task under the cursor (op · worker · layer …)
        footer = page.locator(".nl-trace-plot-canvas .jupyter-matplotlib-footer")
        named = ""
        for k in range(160):               # along both workers' rows, until a task is hit
            page.mouse.move(x0 + (0.1 + 0.8 * (k % 80) / 80) * w,
                            y0 + (0.2 if k < 80 else 0.38) * h)
            page.wait_for_timeout(50)
            named = footer.inner_text()
            if " · " in named:
                break
        assert " · layer 0 · forward · " in named and " ms" in named, named
        # zoom: the toolbar's rectangle tool (the toolbar shows while the pointer is over
        # the figure), dragged over the middle of the axes
        page.mouse.move(x0 + 0.5 * w, y0 + 0.3 * h)
        page.locator(".nl-trace-plot-canvas button[title^='Zoom to rectangle']").click()
        page.mouse.move(x0 + 0.35 * w, y0 + 0.2 * h)
        page.mouse.down()
        page.mouse.move(x0 + 0.55 * w, y0 + 0.35 * h, steps=8)
        page.mouse.up()
        expect(page.locator(".nl-trace-range")).not_to_have_text(
            f"showing {lo:.3f}–{hi:.3f} ms", timeout=STEP_S * 1000)
        zlo, zhi = _range(page)
        assert lo <= zlo < zhi <= hi and zhi - zlo < 0.5 * (hi - lo), ((lo, hi), (zlo, zhi))
        page.wait_for_timeout(1500)        # the zoomed image reaches the canvas
        _painted(page)
        page.locator(".jp-OutputArea-output", has=page.locator(".nl-trace-table")).first \
            .screenshot(path=str(shot))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_rerunning_the_set_up_cell_in_chromium(tmp_path):
    """Re-running a notebook's set-up cell while its runtime lives (the normal thing to do
    in Jupyter) replaces the runtime and says so, instead of refusing."""
    from playwright.sync_api import expect
    shot = tmp_path / "rerun.png"
    with notebook_page(tmp_path, "01_quickstart.ipynb", shot, run_all=False) as page:
        cell = page.locator(".jp-CodeCell").first
        for _ in range(2):
            cell.locator(".jp-InputArea-editor").click()
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
            expect(cell.locator(".jp-OutputArea-output").last).to_contain_text(
                "Runtime(scheduler='dmda', ncpu=2, running)", timeout=KERNEL_START_S * 1000)
        expect(cell.locator(".jp-OutputArea")).to_contain_text(
            "nntile_lab: stopped the runtime that was running (dmda, 2 workers) after its "
            "tasks finished")
        expect(cell.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter"
                            ".stderr']")).to_have_count(0)
        cell.screenshot(path=str(shot))


def _box(widget, name: str):
    """The input of the widget's text box labelled ``name``."""
    return widget.locator(".widget-text", has=widget.page.locator(
        "label", has_text=re.compile(rf"^{re.escape(name)}$"))).locator("input")


def _set(box, text: str) -> None:
    box.fill(text)
    box.press("Enter")


def _kernel_status(page) -> str:
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext"
                         ".session.kernel.status")


# each input error of issue 33's list, in the tile sweep: (box, typed, said)
STALE_CASES = [
    ("n_embd", "0", "n_embd=0"),
    ("n_layer", "-1", "n_layer=-1"),
    ("n_head", "3", "is not divisible by n_head=3"),
    ("batch", "0", "batch=0 must be ≥ 1"),
    ("inner_tile", "512:128:64", "inner_tile '512:128:64': LOW=512 is above HIGH=128"),
]


def _shows_no_sweep(widget) -> None:
    """Nothing of an earlier sweep is on screen: no plot, no words for one, no point picker
    entries, no point's detail."""
    from playwright.sync_api import expect
    for gone in (".nl-sweep-plot-canvas", ".nl-sweep-gantt-canvas", ".nl-sweep-plot-words",
                 ".nl-sweep-point option"):
        expect(widget.locator(gone)).to_have_count(0)


def test_tile_sweep_interrupts_and_never_shows_stale_results_in_chromium(tmp_path):
    """Issue 33: Kernel → Interrupt ends every button-started sweep within 2 s (it was
    ignored from the second click on: ipykernel runs later clicks in a subshell thread),
    the kernel shows busy while one runs, and every input error (STALE_CASES, then 2.5 in a
    number box and empty tile boxes) clears the previous sweep's plot, status, picker and
    point detail; 2.5 in a number box stays 2.5 and is refused; a range of
    2048 points asks for confirmation; empty tile boxes are named."""
    from playwright.sync_api import expect
    shot = tmp_path / "tile_sweep_interrupts.png"
    with notebook_page(tmp_path, NOTEBOOK, shot) as page:
        widget = _swept_widget(page)
        status = widget.locator(".nl-sweep-status")
        message = widget.locator(".nl-sweep-message")
        run = widget.locator("button.nl-sweep-run")
        # the notebook's own sweep left a plot, a status and a picker: each input error
        # below must take them away (they would read as that input's result)
        expect(status).to_contain_text("done: 3 points")
        for field, text, said in STALE_CASES:
            # the notebook's sweep again (cached): its plot, picker and a point's detail
            if not status.inner_text().startswith("done: 3 points"):
                run.click()
                expect(status).to_contain_text("done: 3 points", timeout=STEP_S * 1000)
            widget.locator(".nl-sweep-point select").select_option(index=1)
            expect(widget.locator(".nl-sweep-gantt-canvas")).to_have_count(1)
            box = _box(widget, field)
            old = box.input_value()
            _set(box, text)
            run.click()
            expect(message).to_contain_text(said)
            expect(status).to_have_text("not run: the values have an error (below)")
            _shows_no_sweep(widget)
            _set(box, old)
        run.click()
        expect(status).to_contain_text("done: 3 points", timeout=STEP_S * 1000)
        widget.locator(".nl-sweep-point select").select_option(index=1)
        expect(widget.locator(".nl-sweep-gantt-canvas")).to_have_count(1)
        n_embd = _box(widget, "n_embd")
        _set(n_embd, "2.5")
        run.click()
        expect(message).to_contain_text("n_embd='2.5' is not a whole number: enter an "
                                        "integer")
        expect(n_embd).to_have_value("2.5")                 # not 25
        expect(status).to_have_text("not run: the values have an error (below)")
        _shows_no_sweep(widget)
        _set(n_embd, "128")
        tiles = _box(widget, "inner_tile")
        _set(tiles, "")
        run.click()
        expect(message).to_contain_text("no tile sizes to vary: every tile box is empty")
        expect(widget).not_to_contain_text("the messages above")
        _set(tiles, "1:2048:1")
        run.click()
        expect(status).to_have_text("not run: 2,048 points need confirming (below)")
        expect(message).to_contain_text("this sweep has 2,048 points (inner_tile 2048)")
        expect(widget.locator("button.nl-sweep-confirm")).to_have_text("Run all 2,048 points")
        expect(widget.locator("button.nl-sweep-confirm")).to_be_visible()
        # points not in the notebook's cache: each run is interrupted in its first points
        _set(tiles, "96,160,192,224,288")
        expect(widget.locator("button.nl-sweep-confirm")).to_be_visible()
        for attempt, how in enumerate(("interrupt", "interrupt", "interrupt", "stop")):
            run.click()
            expect(widget.locator("button.nl-sweep-confirm")).to_be_hidden()
            expect(status).to_contain_text("running: ", timeout=STEP_S * 1000)
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget"
                                   ".sessionContext.session.kernel.status === 'busy'",
                                   timeout=5000)
            page.wait_for_timeout(700)
            assert _kernel_status(page) == "busy", attempt
            asked = time.monotonic()
            if how == "interrupt":
                page.evaluate("window.jupyterapp.commands.execute('kernelmenu:interrupt')")
            else:
                widget.locator("button.nl-sweep-stop").click()
            word = "interrupted" if how == "interrupt" else "stopped"
            expect(status).to_contain_text(f"{word} after ", timeout=30_000)
            took = time.monotonic() - asked
            assert took < 2.0, (attempt, how, took, status.inner_text())
            expect(status).to_contain_text("(they are cached: Run resumes)")
            expect(run).to_be_enabled()
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget"
                                   ".sessionContext.session.kernel.status === 'idle'",
                                   timeout=10_000)
        # no traceback anywhere: the interrupts end in the status line
        expect(page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter"
                            ".stderr']")).to_have_count(0)
        expect(page.locator(".jp-RenderedText", has_text="Traceback")).to_have_count(0)
        _painted(page)
        widget.screenshot(path=str(shot))
    print(f"screenshot: {shot}")


def test_scheduler_sweep_input_errors_clear_the_last_result_in_chromium(tmp_path):
    """No scheduler selected, or 2.5 repeats: the error is said in the widget's words, the
    previous run's plot and "done" status go, and the box keeps what was typed."""
    from playwright.sync_api import expect
    shot = tmp_path / "scheduler_sweep_errors.png"
    with notebook_page(tmp_path, "04_scheduler_sweep.ipynb", shot) as page:
        widget = page.locator(".jp-OutputArea-output", has=page.locator(
            ".nl-sched-run")).first
        status = widget.locator(".nl-sched-status")
        expect(status).to_contain_text("done: 3 points", timeout=NOTEBOOK_RUN_S * 1000)
        expect(widget.locator(".nl-sched-plot-canvas")).to_have_count(1)
        # every policy offered applies to a real run: graph_test is StarPU's test policy
        options = widget.locator(".widget-select-multiple select option").all_inner_texts()
        assert "lws" in options and "graph_test" not in options, options
        repeats = _box(widget, "repeats")
        _set(repeats, "2.5")
        widget.locator("button.nl-sched-run").click()
        expect(widget.locator(".nl-sched-message")).to_contain_text(
            "repeats='2.5' is not a whole number: enter an integer from 1 to 20")
        expect(repeats).to_have_value("2.5")
        expect(status).to_have_text("not run: the values have an error (below)")
        expect(widget.locator(".nl-sched-plot-canvas")).to_have_count(0)
        _set(repeats, "1")
        widget.locator(".widget-select-multiple select").select_option([])
        widget.locator("button.nl-sched-run").click()
        expect(widget.locator(".nl-sched-message")).to_contain_text(
            "no scheduler selected: pick one or more in the schedulers list")
        expect(status).to_have_text("not run: the values have an error (below)")
        expect(widget.locator(".nl-sched-plot-canvas")).to_have_count(0)
        _painted(page)
        widget.screenshot(path=str(shot))
    print(f"screenshot: {shot}")
