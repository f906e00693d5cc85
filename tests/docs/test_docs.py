"""Docs that run (issue 33 §6): every code block of README.md and docs/ is run as pasted, or
compared with the file it is an excerpt of; the few that cannot run here say why
(tests/docs/blocks.py has the rules). A document's python blocks run in order in one
process, as in one Jupyter session; a block ending in an expression has it shown, as Jupyter
would, and a figure shown must be complete (every plot in it has something drawn)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.docs.blocks import DOCS, LANGS, REPO, every_block, excerpt_problem

BLOCKS = every_block()
# what may stay unrun: each needs another machine or minutes (the reason is in the block)
MAX_NO_RUN = 20   # 18, and docs/tune.md's two tunes (minutes: their budgets)

DRIVER = r'''
import ast, json, sys, traceback
import matplotlib
matplotlib.use("Agg")
from matplotlib.figure import Figure

def complete(fig, where):
    """A figure with nothing in one of its plots is a wrong picture, not a picture."""
    axes = [a for a in fig.axes if a.get_visible() and a.axison]
    assert axes, f"{where}: a figure without a plot"
    for a in axes:
        drawn = a.lines + a.collections + a.patches + a.images + a.tables
        assert drawn, f"{where}: the plot {a.get_title()!r} has nothing drawn"

ns = {"__name__": "__main__"}
for where, code in json.load(open(sys.argv[1])):
    print(f"--- {where}", flush=True)
    try:
        tree = ast.parse(code, where)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, where, "exec"), ns)
        if last is not None:   # shown, as Jupyter shows a cell's last expression
            value = eval(compile(ast.Expression(last.value), where, "eval"), ns)
            if isinstance(value, Figure):
                complete(value, where)
                value.savefig(f"figure_{len(ns)}.png")
            elif value is not None:
                print(repr(value)[:2000])
    except BaseException:
        traceback.print_exc()
        print(f"DOCS: the block at {where} failed", file=sys.stderr)
        sys.exit(1)
'''


def _scratch(tmp_path):
    """A folder that looks like the checkout (its top-level entries linked: ``docs``,
    ``notebooks``, ``Makefile`` …, as the commands are typed from there) whose new files
    (runs/, data/) stay out of it."""
    for entry in REPO.iterdir():
        if entry.name not in ("runs", "data", "site", ".git"):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def _env(tmp_path) -> dict:
    """The user's environment, with the venv's commands first and a cache of its own (a
    sweep's points are measured, not read from an earlier run's cache)."""
    env = dict(os.environ, MPLBACKEND="Agg", REPO=str(REPO),
               NNTILE_LAB_CACHE=str(tmp_path / ".nntile_lab_cache"),
               PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def test_every_block_says_what_it_is():
    bad = [f"{b.where}: ```{b.lang} ({b.mode})" for b in BLOCKS
           if b.lang not in LANGS or b.mode not in ("run", "excerpt", "text", "no-run")
           or (b.mode == "run" and b.lang not in ("python", "bash"))]
    assert not bad, ("blocks without a kind tests/docs/blocks.py knows (python, bash, c, text; "
                     f"excerpt: PATH or no-run: WHY): {bad}")


def test_few_blocks_are_not_run_and_each_says_why():
    no_run = [b for b in BLOCKS if b.mode == "no-run"]
    run = [b for b in BLOCKS if b.mode == "run"]
    unexplained = [b.where for b in no_run if len(b.arg.split()) < 3]
    assert not unexplained, f"no-run blocks must say why (a GPU, a cluster, minutes): {unexplained}"
    assert len(no_run) <= MAX_NO_RUN and len(no_run) < len(run), (
        f"{len(no_run)} blocks are not run ({len(run)} are): make them run here, smaller, "
        f"or raise MAX_NO_RUN with a reason: {[b.where for b in no_run]}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mode == "excerpt"],
                         ids=lambda b: b.where)
def test_an_excerpt_is_in_its_file(block):
    problem = excerpt_problem(block)
    assert problem is None, problem


PY_DOCS = [d for d in DOCS if any(b.path == d and b.lang == "python" and b.mode == "run"
                                  for b in BLOCKS)]


@pytest.mark.slow
@pytest.mark.parametrize("doc", PY_DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_a_documents_python_blocks_run_as_pasted(doc, tmp_path):
    mine = [(b.where, b.code) for b in BLOCKS
            if b.path == doc and b.lang == "python" and b.mode == "run"]
    (tmp_path / "blocks.json").write_text(json.dumps(mine))
    (tmp_path / "driver.py").write_text(DRIVER)
    run = subprocess.run([sys.executable, "driver.py", "blocks.json"], cwd=_scratch(tmp_path),
                         env=_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (run.stdout[-3000:] + run.stderr[-6000:])


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "bash" and b.mode == "run"],
                         ids=lambda b: b.where)
def test_a_bash_block_runs_as_pasted(block, tmp_path):
    run = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block.code],
                         cwd=_scratch(tmp_path),
                         env=_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (f"{block.where}:\n{block.code}\n--- stdout\n"
                                 f"{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-4000:]}")
