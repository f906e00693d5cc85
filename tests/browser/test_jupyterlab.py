"""The tile-sweep notebook in a real browser: JupyterLab (headless, loopback, token) and
Debian's Chromium driven by Playwright run the notebook, press the widget's Run button, wait
for the plot and count the points shown; a screenshot is kept.

Never skipped: without Chromium or Playwright the test fails and says how to install them
(`scripts/setup.sh test` does). Every wait has a timeout, and the server and browser are
stopped whatever happens.
"""
from __future__ import annotations

import contextlib
import json
import os
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


def test_tile_sweep_widget_in_chromium(tmp_path):
    _require_browser()
    from playwright.sync_api import expect, sync_playwright
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    shutil.copy(NOTEBOOKS / NOTEBOOK, root / NOTEBOOK)
    shot = tmp_path / "tile_sweep.png"
    with jupyterlab(root, state) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     timeout=STEP_S * 1000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(STEP_S * 1000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
            # the kernel is up when the toolbar's kernel status reads Idle
            page.wait_for_function(
                "() => { const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
                " return !!(w && w.sessionContext && w.sessionContext.session &&"
                " w.sessionContext.session.kernel &&"
                " w.sessionContext.session.kernel.status === 'idle'); }",
                timeout=KERNEL_START_S * 1000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # the last cell prints the best point once the notebook's own sweep is done
            page.locator(".jp-OutputArea-output pre", has_text="best inner_tile =").wait_for(
                timeout=NOTEBOOK_RUN_S * 1000)

            widget = page.locator(".jp-OutputArea-output", has=page.locator(
                ".nl-sweep-run")).first
            status = widget.locator(".nl-sweep-status")
            # two tile sizes, one new (not in the notebook's cache): the button measures it
            tiles = widget.locator(".widget-text", has_text="inner_tile").locator("input")
            tiles.fill("96,128")
            tiles.press("Enter")
            widget.locator("button.nl-sweep-run").click()
            status.get_by_text("done: 2 points").wait_for(timeout=SWEEP_S * 1000)
            # one picker entry per point on the plot, the new sweep's (the widget sets the
            # status last; the browser may still be applying the picker's update: retry)
            picker = widget.locator(".nl-sweep-point select option")
            expect(picker).to_have_text(["inner_tile=96", "inner_tile=128"],
                                        timeout=STEP_S * 1000)

            plot = widget.locator(".nl-sweep-plot img, img.nl-sweep-plot").first
            plot.wait_for()
            plot.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete && img.naturalWidth > 200",
                                   arg=plot.element_handle())
            box = plot.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 100
            page.evaluate("() => new Promise(r => requestAnimationFrame("
                          "() => requestAnimationFrame(r)))")  # painted, then the shot
            widget.screenshot(path=str(shot))  # picker, Run, status, table and plot
            src = plot.get_attribute("src") or ""
            png = page.evaluate("u => fetch(u).then(r => r.arrayBuffer()).then(b =>"
                                " Array.from(new Uint8Array(b)))", src)
            png = bytes(png)
            assert png[:8] == b"\x89PNG\r\n\x1a\n", src[:60]
            (tmp_path / "plot.png").write_bytes(png)  # the plot as the browser received it
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(shot))
            log = (state / "server.log").read_text(errors="replace")[-4000:]
            print(f"screenshot of the failure: {shot}\nJupyterLab's log (end):\n{log}")
            raise
        finally:
            browser.close()
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
