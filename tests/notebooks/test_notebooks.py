"""Every notebook runs top to bottom in a real Jupyter kernel (at smoke size), and is
committed without outputs."""
from __future__ import annotations

import importlib.util
import json
import shutil

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.jupyter_kernel import KERNEL_NAME, NOTEBOOKS, REPO, write_kernel_spec

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


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel(path, tmp_path, kernel_specs):
    shutil.copy(path, tmp_path / path.name)
    try:
        nb = run_notebook(tmp_path / path.name, tmp_path, kernel_specs)
    except CellExecutionError as exc:  # the failing cell's traceback, not nbclient's frames
        pytest.fail(f"{path.name} failed in the kernel:\n{exc}", pytrace=False)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "a code cell did not run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
