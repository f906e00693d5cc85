"""Option fuzzing: every option of the commands that take the spec's fields (and their
own), fed values drawn from the option's type (the spec's field metadata, argparse's
type): wrong types, zero, negatives, huge numbers, nan/inf, empty and odd text. Each
call either passes validation (the command's work is replaced by a sentinel: nothing is
measured) or ends with exit 2 and one message naming the option; never a traceback, a
raw ``[Errno …]``, an internal name, a hang (an alarm bounds every call)."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nntile_lab import cli

INTERNAL = ("total_steps", "Traceback", "[Errno", "object has no attribute", "NoneType",
            "unsupported operand", "not subscriptable")


class Reached(Exception):
    """Validation passed: the command would start its work now."""


def _reached(*_a, **_k):
    raise Reached


# command → (extra argv making it stop before work, objects whose work is replaced)
COMMANDS = {
    "plan": ([], []),
    "train": (["--data", "/nonexistent/nl-fuzz", "--out", "/tmp/nl-fuzz-out"],
              [("nntile_lab.train.cli", "_data_dir")]),
    "sweep": (["--cache", "/tmp/nl-fuzz-cache"], [("nntile_lab.sweep.cli", "run")]),
    "figures": (["--out", "/tmp/nl-fuzz-figures"], [("nntile_lab.figures.cli", "run_figures")]),
    "bench train": ([], [("nntile_lab.bench.train", "run")]),
    "bench gemm": ([], [("nntile_lab.bench.gemm", "run")]),
    "bench schedulers": ([], [("nntile_lab.bench.schedulers", "run")]),
    "bench depth": ([], [("nntile_lab.bench.depth", "run")]),
    "bench memory": ([], [("nntile_lab.bench.memory", "run"),
                          ("nntile_lab.bench.memory", "run_hints")]),
    "collectives": ([], [("nntile_lab.proxies.collectives", "run")]),
    "proxy": (["gpt2"], [("nntile_lab.proxies.replay", "launch"),
                          ("nntile_lab.proxies.models", "build")]),
}


def options(command: str):
    """(flag, type, nargs) of every valued option of ``command``."""
    parser = cli.build_parser()
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    out = []
    for a in parser._actions:
        if not a.option_strings or a.nargs == 0 or isinstance(a, argparse._HelpAction):
            continue
        if a.dest in ("data", "out", "resume", "cache", "from_dir", "record", "ooc_dir",
                      "plot"):
            continue   # paths: tests/faults/test_cli_faults.py and below
        out.append((a.option_strings[0], a.type, a.nargs))
    return out


CASES = [(cmd, *opt) for cmd in COMMANDS for opt in options(cmd)]
BAD_TEXT = ["abc", "", "1.5", "1e3", "0x10", "nan", "inf", "-inf", "-0", " 7", "1,2",
            "1:0:1", "none", "∞", "0" * 30]


def values(kind):
    ints = st.integers(-2**40, 2**40).map(str)
    floats = st.floats(allow_nan=True, allow_infinity=True).map(repr)
    text = st.text(max_size=12)
    if kind is int:
        return st.one_of(ints, st.sampled_from(BAD_TEXT))
    if kind is float:
        return st.one_of(floats, ints, st.sampled_from(BAD_TEXT))
    return st.one_of(text, st.sampled_from(BAD_TEXT))


def call(argv):
    err = io.StringIO()
    old = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError()))
    signal.alarm(20)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:   # argparse's usage errors
                rc = exc.code
            except Reached:
                rc = "reached"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, err.getvalue()


@pytest.fixture
def no_work(monkeypatch):
    for targets in COMMANDS.values():
        for module, name in targets[1]:
            monkeypatch.setattr(importlib.import_module(module), name, _reached)


@pytest.mark.parametrize("command,flag,kind,nargs", CASES,
                         ids=[f"{c}{f}" for c, f, *_ in CASES])
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_option_refuses_garbage_clearly(no_work, command, flag, kind, nargs, data):
    value = data.draw(values(kind), label=flag)
    argv = [*command.split(), f"{flag}={value}", *COMMANDS[command][0]]
    rc, err = call(argv)
    assert rc in (0, 1, 2, "reached"), (argv, rc, err)
    assert not any(word in err for word in INTERNAL), (argv, err)
    last = err.strip().splitlines()[-1] if err.strip() else ""   # not argparse's usage
    if rc == 2 and "/nonexistent/nl-fuzz" not in last:
        assert flag in last or flag.lstrip("-").replace("-", "_") in last, (argv, err)
    if must_refuse(flag, kind, value):   # garbage is never accepted
        assert rc == 2, (argv, rc, err)


def must_refuse(flag, kind, value) -> bool:
    """What no option of its type takes: not a number; for integers (sizes, counts, steps,
    seeds) a negative value or one past C's 32-bit int; for floats nan/inf; a memory limit
    or disk node under StarPU's 16 MiB."""
    if kind not in (int, float):
        return False
    try:
        number = int(value) if kind is int else float(value)
    except ValueError:
        return True
    if kind is float:
        return number != number or abs(number) == float("inf") or number < 0
    return number < 0 or number >= 2**31 or (
        flag in ("--memory-limit-mb", "--ooc-size-mb", "--cap-mb") and number < 16)
