"""The architecture is checked, not hoped for: the import-linter contracts in pyproject.toml
(layers and no cycles, docs/layout.md) hold on the tree and break on a deliberate upward
import or cycle; names private to a module stay in it; an import inside a function has a
reason written beside it."""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "nntile_lab"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root`` (its pyproject.toml's contracts)."""
    require("importlinter")
    env = {**os.environ, "PYTHONPATH": str(root)}   # before the editable install's finder
    code = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _copy_tree(tmp_path: Path) -> Path:
    """The package's Python files and pyproject.toml, copied under ``tmp_path``."""
    shutil.copytree(PACKAGE, tmp_path / "nntile_lab",
                    ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or
                                                                       (Path(d) / n).is_dir())])
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def _inject(path: Path, line: str) -> None:
    """Append an import at module level (after the module's own imports run)."""
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_contracts_hold_on_the_tree():
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout, done.stdout[-2000:]


def test_an_upward_import_breaks_the_layers(tmp_path):
    root = _copy_tree(tmp_path)
    _inject(root / "nntile_lab" / "runtime.py", "import nntile_lab.widgets  # noqa")
    done = _lint_imports(root)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "nntile_lab.runtime is not allowed to import nntile_lab.widgets" in done.stdout


def test_a_cycle_between_siblings_breaks_the_acyclic_contract(tmp_path):
    """sweep and bench share a layer (bench uses the sweeps): the layers allow either
    direction, the cycle contract not both."""
    root = _copy_tree(tmp_path)
    _inject(root / "nntile_lab" / "sweep" / "grid.py", "import nntile_lab.bench.depth  # noqa")
    done = _lint_imports(root)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "No import cycles between sibling packages or modules BROKEN" in done.stdout
    assert "Layers: a module imports only from the layers below it KEPT" in done.stdout


def test_a_new_module_must_be_placed_in_a_layer(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "nntile_lab" / "newcomer.py").write_text('"""Not in any layer yet."""\n')
    done = _lint_imports(root)
    assert done.returncode != 0
    assert "nntile_lab.newcomer" in done.stdout + done.stderr


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def test_no_private_name_is_imported_from_another_module():
    """``from nntile_lab.x import _name`` outside package ``nntile_lab.x`` means ``_name`` is
    API: it gets a public name (a package may import its own private modules, and the
    compiled extension's loader ``nntile_lab._lib`` is the one private module for all)."""
    bad = []
    for path, tree in _modules():
        me = _module_name(path)
        for node in ast.walk(tree):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if not module.startswith("nntile_lab") or me.startswith(module + ".") or me == module:
                continue
            bad += [f"{path.relative_to(REPO)}:{node.lineno} {a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                    and not (module == "nntile_lab" and a.name == "_lib")]
    assert not bad, bad


def _guarded(node, parents) -> bool:
    """Inside ``try: ... except ImportError``: optional on purpose, with its own message."""
    for p in parents:
        if isinstance(p, ast.Try) and any(
                h.type is not None and "ImportError" in ast.unparse(h.type) for h in p.handlers):
            return True
    return False


def test_every_import_inside_a_function_says_why():
    """Function-level imports are for optional heavy dependencies (torch, mpi4py, pyplot…)
    and for the compiled extension in modules that import without it; each has a comment
    on its line or on the line above its group, or sits in ``try/except ImportError``."""
    missing = []
    for path, tree in _modules():
        lines = path.read_text().splitlines()
        stack = [(tree, [])]
        while stack:
            node, parents = stack.pop()
            in_function = any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))
                              for p in parents)
            if (isinstance(node, (ast.Import, ast.ImportFrom)) and in_function
                    and not _guarded(node, parents)):
                i = node.lineno - 1
                while i > 0 and (lines[i - 1].lstrip().startswith(("import ", "from "))
                                 or not lines[i - 1].strip()):
                    i -= 1       # the first import of a group carries the comment
                said = "#" in lines[node.lineno - 1] or lines[i - 1].lstrip().startswith("#")
                if not said:
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno}")
            stack += [(c, parents + [node]) for c in ast.iter_child_nodes(node)]
    assert not missing, missing


@pytest.mark.parametrize("folder", ["dist", "build"])
def test_no_package_folder_hides_from_the_tools(folder):
    """ruff and pytest skip folders named like build output by default (pytest never
    collected tests/dist, ruff never read nntile_lab/dist)."""
    assert not list(REPO.glob(f"nntile_lab/**/{folder}/*.py")), folder
    assert not list(REPO.glob(f"tests/**/{folder}/*.py")), folder
