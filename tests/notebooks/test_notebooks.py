"""Every notebook runs top to bottom in a real Jupyter kernel (at smoke size), and is
committed without outputs."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import time

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from nntile_lab.jupyter_figure import CSS_DPI, WIDTH
from tests.jupyter_kernel import (
    KERNEL_NAME,
    NOTEBOOKS,
    REPO,
    execute,
    running_kernel,
    write_kernel_spec,
)

PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
CELL_TIMEOUT_S = 600  # a hung cell fails the test instead of the CI run


def _strip_script():
    spec = importlib.util.spec_from_file_location("strip_notebooks",
                                                  REPO / "scripts" / "strip_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_notebooks_are_there():
    names = {p.stem for p in PATHS}
    for want in ("01_quickstart", "02_trace", "03_tile_sweep", "04_scheduler_sweep",
                 "05_trace_explorer", "06_paper_figures", "07_out_of_core"):
        assert want in names, f"notebooks/{want}.ipynb is missing"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    assert not _strip_script().strip(nb), f"{path.name} has outputs: run `make strip`"


def test_strip_removes_outputs(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                  execution_count=1)]
    nb.cells[0].execution_count = 1
    p = tmp_path / "x.ipynb"
    nbformat.write(nb, p)
    strip = _strip_script()
    assert strip.main(["--check", str(p)]) == 1
    assert strip.main([str(p)]) == 0
    assert strip.main(["--check", str(p)]) == 0
    cell = nbformat.read(p, as_version=4).cells[0]
    assert cell.outputs == [] and cell.execution_count is None and cell.source == "1 + 1"


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory):
    return KernelSpecManager(kernel_dirs=[str(write_kernel_spec(
        tmp_path_factory.mktemp("jupyter")) / "kernels")])


def run_notebook(path, workdir, kernel_specs):
    """Execute a copy of ``path`` in ``workdir`` (its files land there, not in the repo)."""
    nb = nbformat.read(path, as_version=4)
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=kernel_specs)
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, startup_timeout=120,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return nb


OBJECT_REPR = re.compile(r"<[\w.]+ (object )?at 0x[0-9a-f]+>|^\[?<matplotlib\.")
SHOWN = ("image/png", "application/vnd.jupyter.widget-view+json")


def shows_something(cell) -> bool:
    """A picture or a widget among the cell's outputs (a bare Figure would be text/plain)."""
    return any(m in o.get("data", {}) for o in cell.outputs for m in SHOWN)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel(path, tmp_path, kernel_specs):
    """Every cell runs; every cell tagged ``figure`` shows a picture or a widget; the notebook
    writes nothing beside itself (its files go under runs/)."""
    shutil.copy(path, tmp_path / path.name)
    try:
        nb = run_notebook(tmp_path / path.name, tmp_path, kernel_specs)
    except CellExecutionError as exc:  # the failing cell's traceback, not nbclient's frames
        pytest.fail(f"{path.name} failed in the kernel:\n{exc}", pytrace=False)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "a code cell did not run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    blank = [c.source.splitlines()[-1] for c in code
             if "figure" in c.metadata.get("tags", []) and not shows_something(c)]
    assert not blank, f"{path.name}: cells meant to show a figure show none: {blank}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], \
        f"{path.name} wrote files beside itself (they belong under runs/)"
    stderr = [c.source.splitlines()[-1] for c in code for o in c.outputs
              if o.output_type == "stream" and o.name == "stderr" and o.text.strip()]
    assert not stderr, f"{path.name} prints on stderr (the pink background): {stderr}"
    # a cell ending in a matplotlib call shows its return value as text above the picture
    # (`<matplotlib.legend.Legend at 0x…>`): end it with `;` or plt.show()
    reprs = [o["data"]["text/plain"] for c in code for o in c.outputs
             if o.output_type == "execute_result"
             and OBJECT_REPR.search(o.get("data", {}).get("text/plain", ""))]
    assert not reprs, f"{path.name} shows objects' repr: {reprs}"


NEEDS = {"PyTorch": ("run_figures", "torch"), "Open MPI": ("replay.", "collectives.", "--ranks")}


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_a_notebook_says_in_its_first_cell_what_it_needs(path):
    """PyTorch and MPI are not in the jupyter extra: a notebook using them says so first."""
    cells = nbformat.read(path, as_version=4).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    for need, uses in NEEDS.items():
        if any(u in code for u in uses):
            assert f"**Needs {need}" in cells[0].source, (path.name, need)


def test_notebooks_that_draw_tag_their_figure_cells():
    """A cell that draws (ends in a figure or a widget, or displays an image) is tagged
    ``figure``, so the test above checks that it shows one."""
    widgets = ("sweep", "sched", "explorer")
    for path in PATHS:
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type != "code" or not c.source.strip():
                continue
            last = c.source.rstrip().splitlines()[-1].strip()
            draws = (last.startswith(("viz.", "fig")) or last in widgets
                     or "display(Image" in c.source or "plt.subplots" in c.source)
            assert not draws or "figure" in c.metadata.get("tags", []), (path.name, last)


KERNEL_CELLS = {
    # a bare Figure from the library, no pyplot, no %matplotlib: a picture
    "picture": "from nntile_lab.plots.sweep import tile_figure\nimport pandas as pd\n"
               "tile_figure(pd.DataFrame())",
    # the library never switches the kernel's backend
    "backend": "import matplotlib\nimport nntile_lab.plots.paper, nntile_lab.trace.viz\n"
               "print(dict.__getitem__(matplotlib.rcParams, 'backend'))",
    # a re-run set-up cell: the running runtime stops, a line says so
    "setup": "import nntile_lab as nl\nrt = nl.Runtime(scheduler='eager', ncpu=1)\n"
             "x = nl.full((4,), 1.0, (2,))",
    "setup again": "rt = nl.Runtime(scheduler='lws', ncpu=1)\n"
                   "print(rt, nl.full((4,), 2.0, (2,)).to_numpy().sum())",
    # an interrupted sweep: one line, not a traceback through subprocess
    "interrupt": "from nntile_lab.sweep import run, grid\n"
                 "from nntile_lab.spec import ExperimentSpec\nrt.stop()\n"
                 "def stop(row):\n    raise KeyboardInterrupt\n"
                 "run(grid(ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, "
                 "seq_len=8, batch=2, measure_steps=1), batch_tile=[1, 2]), CACHE, "
                 "isolate=False, progress=False, on_point=stop, peak_gflops=1.0)",
    "widget": "%matplotlib widget\nfrom nntile_lab.plots.sweep import tile_figure\n"
              "tile_figure(pd.DataFrame())",
}


def test_in_a_kernel_figures_show_reruns_work_and_interrupts_are_one_line(tmp_path,
                                                                          kernel_specs):
    cells = [f"CACHE = {str(tmp_path / 'cache')!r}", *KERNEL_CELLS.values()]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=kernel_specs)
    NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, startup_timeout=120, allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = dict(zip(KERNEL_CELLS, nb.cells[1:]))

    def text(cell):
        return "".join(o.get("text", "") for o in cell.outputs)
    picture = out["picture"].outputs
    assert [o.output_type for o in picture] == ["execute_result"]
    assert "image/png" in picture[0].data and \
        picture[0].metadata["image/png"]["width"] == round(WIDTH * CSS_DPI)
    assert "inline" in text(out["backend"]), text(out["backend"])
    assert not out["setup"].outputs
    said = text(out["setup again"])
    assert "stopped the runtime that was running (eager, 1 worker)" in said, said
    assert "Runtime(scheduler='lws', ncpu=1, running) 8.0" in said
    (err,) = [o for o in out["interrupt"].outputs if o.output_type == "error"]
    assert err.ename == "Interrupted" and len(err.traceback) == 1, err.traceback
    assert err.traceback[0].startswith("Interrupted: sweep stopped after 1 of 2 points")
    widget = out["widget"].outputs[-1].data
    assert "application/vnd.jupyter.widget-view+json" in widget and "image/png" in widget


def interrupted(km, kc, code: str, marker: str, within_s: float) -> list[str]:
    """Run ``code``, interrupt the kernel 0.5 s after it prints ``marker`` (the next
    point's process is running then); the cell must end in ``Interrupted`` within
    ``within_s`` of the interrupt, as one line: that line's list."""
    sent = []

    def on_output(text):
        if marker in text and not sent:
            time.sleep(0.5)
            sent.append(time.monotonic())
            km.interrupt_kernel()
    reply, _ = execute(kc, code, timeout=600, on_output=on_output)
    assert sent, f"{marker!r} was never printed"
    assert reply["status"] == "error" and reply["ename"] == "Interrupted", reply
    assert len(reply["traceback"]) == 1, reply["traceback"]
    assert time.monotonic() - sent[0] < within_s
    return reply["traceback"]


@pytest.mark.slow
def test_interrupt_kernel_during_a_sweep_ends_in_one_line(tmp_path):
    """Jupyter's "interrupt kernel" (SIGINT) while a sweep runs its points in subprocesses:
    the cell ends with one line naming what was kept, not a traceback through subprocess."""
    with running_kernel(tmp_path / "kernel", cwd=tmp_path) as (km, kc):
        sweep = (
            "from nntile_lab.sweep import run, grid\n"
            "from nntile_lab.spec import ExperimentSpec\n"
            "base = ExperimentSpec(n_layer=1, n_head=2, n_embd=32, vocab_size=64, seq_len=8,"
            " batch=2, warmup_steps=1, measure_steps=200)\n"
            f"df = run(grid(base, batch_tile=[1, 2, 3]), {str(tmp_path / 'cache')!r},"
            " progress=False, peak_gflops=1.0, on_point=lambda r: print('POINT', flush=True))\n")
        (line,) = interrupted(km, kc, sweep, "POINT", within_s=30)
        assert line.startswith(
            "Interrupted: sweep stopped after 1 of 3 points; the finished ones are cached")
        # the kernel goes on; the finished point is cached
        again, _ = execute(kc, "print(len(list(__import__('pathlib').Path("
                             f"{str(tmp_path / 'cache')!r}).glob('*.json'))))", timeout=60,
                         on_output=lambda t: None)
        assert again["status"] == "ok"


def test_interrupt_kernel_during_the_paper_figures_ends_in_one_line(tmp_path):
    """06's measuring cell interrupted (it printed ~40 lines of KeyboardInterrupt through
    subprocess and selectors): one line naming what was recorded."""
    with running_kernel(tmp_path / "kernel", cwd=tmp_path) as (km, kc):
        figures = (
            "import sys\nfrom dataclasses import replace\n"
            "from nntile_lab.figures import QUICK, run_figures\n"
            "plan = replace(QUICK, layers=(4,), embds=(64, 128, 192),\n"
            "               systems=('nntile_lab', 'torch_fp32'))\n"
            f"run_figures(plan, {str(tmp_path / 'figures')!r}, progress=sys.stdout)\n")
        assert interrupted(km, kc, figures, "[1/6", within_s=10) == [
            f"Interrupted: figures stopped after 1 of 6 points; the measured ones are "
            f"recorded in {tmp_path / 'figures'}: run it again to resume"]
