"""One convention for every ``nntile-lab`` subcommand: how it registers, its exit codes,
and what ``--json`` prints (nntile_lab.cli's docstring states them)."""
import argparse
import importlib
import json
import re
import sys
import types
from pathlib import Path

import pytest

from nntile_lab import cli
from nntile_lab.errors import UsageError

PACKAGE = Path(cli.__file__).parent


def _registered(module: str) -> list[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module(module).register_cli(sub)
    return list(sub.choices)


@pytest.mark.parametrize("module", sorted(cli.COMMANDS))
def test_the_table_names_what_each_module_registers(module):
    assert module.endswith("cli")      # <package>.cli, or a point process's lighter point_cli
    assert _registered(module) == list(cli.COMMANDS[module])


def test_one_way_to_register_and_no_other_entry_point():
    """Parsers are made only in the modules of the table; no module but cli.py and the
    engine's point process (engine/worker.py) runs as ``python -m`` (MPI ranks start hidden
    subcommands instead)."""
    worker = PACKAGE / "engine" / "worker.py"
    table = {str(PACKAGE.parent / (m.replace(".", "/") + ".py")) for m in cli.COMMANDS}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if (path.name != "cli.py" or path.parent != PACKAGE) and path != worker:
            assert 'if __name__ == "__main__"' not in text, path
        if str(path) not in table:
            assert ".add_parser(" not in text, f"{path} adds a subcommand outside COMMANDS"
        assert not re.search(r'"-m",\s*"nntile_lab\.(?!cli"|engine\.worker")', text), \
            f"{path} starts `python -m` on a module other than nntile_lab.cli"


def test_version(capsys):
    import nntile_lab
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"nntile-lab {nntile_lab.__version__}")


def test_hidden_commands_stay_out_of_help(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    hidden = [n for names in cli.COMMANDS.values() for n in names if n.startswith("_")]
    assert hidden and not [n for n in hidden if n in out]
    assert "train" in out and "exit status: 0 done, 1 failed, 2 usage error" in out


def _fake(monkeypatch, behaviour):
    """A one-command module ``fake`` in the table whose work does ``behaviour()``."""
    mod = types.ModuleType("nntile_lab_fake_cli")

    def register_cli(sub):
        p = sub.add_parser("fake")
        p.add_argument("--n", type=int, default=1)
        p.set_defaults(func=lambda args: behaviour())
    mod.register_cli = register_cli
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setattr(cli, "COMMANDS", {mod.__name__: ("fake",)})


def _raise(exc):
    def f():
        raise exc
    return f


@pytest.mark.parametrize("behaviour, code, said", [
    (lambda: 0, 0, None),
    (lambda: None, 0, None),
    (lambda: 1, 1, None),
    (_raise(UsageError("--n 0: give 1 or more")), 2, "--n 0: give 1 or more"),
    (_raise(ValueError("--n 3 is odd")), 2, "--n 3 is odd"),        # names the option
    (_raise(ValueError("the checkpoint is corrupt")), 1, "the checkpoint is corrupt"),
    (_raise(OSError(28, "No space left on device")), 1, "No space left on device"),
    (_raise(RuntimeError("task failed")), 1, "task failed"),
    (_raise(KeyboardInterrupt()), 130, "interrupted"),
])
def test_exit_codes(monkeypatch, capsys, behaviour, code, said):
    _fake(monkeypatch, behaviour)
    assert cli.main(["fake"]) == code
    err = capsys.readouterr().err
    if said:
        assert said in err and "Traceback" not in err
        assert err.startswith("nntile-lab")


def test_argparse_usage_errors_exit_2(monkeypatch, capsys):
    _fake(monkeypatch, lambda: 0)
    # one line each (docs/cli.md), not argparse's usage block; an unknown option named by
    # its subcommand; the hidden subcommands are no choice
    for argv, said in ((["fake", "--n", "x"], "nntile-lab fake: error: argument --n: invalid"),
                       (["fake", "--bogus", "1"], "nntile-lab fake: error: unrecognized "
                                                  "arguments: --bogus 1 (see: nntile-lab fake "
                                                  "--help)"),
                       (["nosuch"], "nntile-lab: error: argument COMMAND: invalid choice: "
                                    "'nosuch' (choose from "),
                       ([], "nntile-lab: error: the following arguments are required: COMMAND")):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(said) and err.count("\n") == 1, (argv, err)
        assert "usage:" not in err and "'_" not in err, err


def test_a_bug_keeps_its_traceback(monkeypatch):
    _fake(monkeypatch, _raise(KeyError("x")))
    with pytest.raises(KeyError):
        cli.main(["fake"])


def _json_lines(out: str) -> list:
    lines = out.splitlines()
    assert lines, "no output"
    docs = [json.loads(line) for line in lines]
    assert isinstance(docs[-1], dict)
    return docs


@pytest.mark.parametrize("argv, lines", [
    (["plan", "--n-layer", "1", "--n-embd", "64", "--vocab-size", "256", "--seq-len", "16",
      "--batch", "2"], 1),
    (["bench", "gemm", "--n", "64", "--tiles", "32", "--repeats", "1", "--ncpu", "1"], 1),
    (["bench", "kernels", "--only", "copy", "--repeats", "1"], 1),
    (["bench", "submit-cost", "--tasks", "50", "--repeats", "1"], 1),
    (["proxy", "gpt2", "--config", "small", "--dry-run"], 1),
])
def test_json_is_one_document_per_line_result_last(capsys, argv, lines):
    assert cli.main([*argv, "--json"]) == 0
    docs = _json_lines(capsys.readouterr().out)
    assert len(docs) == lines


def test_every_public_subcommand_with_json_documents_it():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    leaves = []
    for name, p in sub.choices.items():
        if name.startswith("_"):
            continue
        inner = next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)
        leaves += ([(f"{name} {n}", q) for n, q in inner.choices.items()] if inner
                   else [(name, p)])
    with_json = [n for n, p in leaves if any("--json" in a.option_strings for a in p._actions)]
    without = sorted(set(n for n, _ in leaves) - set(with_json))
    assert without == [], f"subcommands without --json: {without}"
