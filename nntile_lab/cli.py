"""The ``nntile-lab`` command: everything the notebooks do, with ``--json`` for scripts.

One way to add a subcommand: a ``cli`` module of its package defines
``register_cli(subparsers)``, and ``COMMANDS`` below names the module and the subcommands it
adds (``tests/test_cli_conventions.py`` checks the two agree). Names starting with ``_`` are
hidden: the fresh processes the work starts itself (a sweep point, an MPI rank).

Conventions every subcommand keeps:
  exit 0    the work was done (a grid in which some points failed, e.g. out of memory, was
            done: the failures are rows of its result)
  exit 1    the work failed, or produced nothing (every point of a grid failed)
  exit 2    the command line is wrong (argparse's errors, nntile_lab.errors.UsageError, or an
            error whose message begins with the bad option's name, ``--x ...``)
  exit 130  interrupted (Ctrl-C)
  --json    stdout is JSON Lines: one JSON object per line, the command's result last;
            commands that do not stream print exactly one line (so ``| jq`` and ``tail -1``
            both work everywhere). Progress and messages go to stderr.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import nntile_lab
from nntile_lab.errors import UsageError, os_error_message
from nntile_lab.options import OneLineParser

# module -> the subcommands its register_cli adds (in --help's order)
COMMANDS: dict[str, tuple[str, ...]] = {
    "nntile_lab.data.cli": ("prepare",),
    "nntile_lab.train.cli": ("train", "plan"),
    "nntile_lab.sample.cli": ("sample",),
    "nntile_lab.trace.cli": ("trace", "peak"),
    "nntile_lab.sweep.cli": ("sweep",),
    "nntile_lab.bench.cli": ("bench",),
    "nntile_lab.figures.cli": ("figures",),
    "nntile_lab.tune.cli": ("tune",),
    "nntile_lab.proxies.cli": ("proxy", "collectives", "_replay-rank", "_collectives-rank"),
}

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or only of the module that owns ``command`` (a fresh
    process started for one point imports no more than it needs)."""
    parser = OneLineParser(prog="nntile-lab", description=__doc__.split("\n\n")[0],
                           epilog="exit status: 0 done, 1 failed, 2 usage error, "
                                  "130 interrupted; --json prints JSON Lines, result last")
    parser.add_argument("--version", action="version",
                        version=f"nntile-lab {nntile_lab.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module, names in COMMANDS.items():
        if command is None or command in names:
            importlib.import_module(module).register_cli(sub)
    # hidden subcommands: argparse lists a help=SUPPRESS subparser anyway, so drop its line
    sub._choices_actions = [a for a in sub._choices_actions if not a.dest.startswith("_")]
    return parser


def is_usage_error(exc: BaseException) -> bool:
    """A bad option value: UsageError, or a ValueError that starts with the option's name."""
    return isinstance(exc, UsageError) or (isinstance(exc, ValueError)
                                           and str(exc).startswith("--"))


def main(argv=None) -> int:
    # the CLI draws files, never windows; restored after, so that main() called in a
    # process that goes on (a test, a notebook) leaves its backend, and its kernels', alone
    saved = os.environ.get("MPLBACKEND")
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        return _run(argv)
    finally:
        if saved is None:
            os.environ.pop("MPLBACKEND", None)


def _run(argv) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    known = {n for names in COMMANDS.values() for n in names}
    parser = build_parser(argv[0] if argv and argv[0] in known else None)
    try:
        args = parser.parse_args(argv)
        args.argv = argv   # the command line as given (a launcher re-runs it on each rank)
    except SystemExit as exc:             # --help (0), or a usage error argparse printed (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    # "nntile-lab bench memory" in its messages (OneLineParser names the subcommand)
    name = getattr(args, "command_name", f"nntile-lab {args.command}")
    try:
        code = args.func(args)
    except KeyboardInterrupt as exc:      # Ctrl-C: the shell's code for SIGINT, no traceback
        notes = "".join(f"; {n}" for n in getattr(exc, "__notes__", ()))
        print(f"nntile-lab: interrupted{notes}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, RuntimeError, OSError, ImportError, MemoryError) as exc:
        # the work's own errors (a bad file, a full disk, a task that failed): one line, no
        # traceback; anything else is a bug and keeps its traceback (exit 1 too)
        if is_usage_error(exc):
            print(f"{name}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        # a raw file-system error (errno set) as one sentence; one raised with our own text
        # keeps it
        text = os_error_message(exc) if isinstance(exc, OSError) and exc.errno else exc
        print(f"{name}: error: {text}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if code is None else int(code)


if __name__ == "__main__":
    sys.exit(main())
