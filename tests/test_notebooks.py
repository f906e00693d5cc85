"""The notebooks' code runs top to bottom (kept true as the API moves)."""
import json
from pathlib import Path

import pytest

import nntile_lab as nl

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    cells = json.loads(path.read_text())["cells"]
    namespace: dict = {}
    try:
        for cell in cells:
            if cell["cell_type"] == "code":
                exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    finally:  # a failing notebook must not leave its runtime to the next test
        if nl.Runtime._active is not None:
            nl.Runtime._active.stop()
