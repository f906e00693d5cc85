"""Option fuzzing: every option of every public subcommand (the parser's own list: a new
subcommand missing here fails ``test_every_public_subcommand_is_fuzzed``), fed values drawn
from the option's type (the spec's field metadata, argparse's type): wrong types, zero,
negatives, huge numbers, nan/inf, empty and odd text. Each call either passes validation
(the command's work is replaced by a sentinel: nothing is measured or launched) or ends
with exit 2 and one message naming the option; never a traceback, a raw ``[Errno …]``,
an internal name, a hang (an alarm bounds every call)."""
from __future__ import annotations

import argparse
import collections
import contextlib
import importlib
import io
import signal
import sys
import types

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
              [("nntile_lab.train.cli", "_data_dir"),
               ("nntile_lab.parallel.launch", "prepare_default_corpus")]),
    "sweep": (["--cache", "/tmp/nl-fuzz-cache"], [("nntile_lab.sweep.cli", "run")]),
    "figures": (["--out", "/tmp/nl-fuzz-figures"], [("nntile_lab.figures.cli", "run_figures")]),
    "bench train": ([], [("nntile_lab.bench.train", "run")]),
    "bench gemm": ([], [("nntile_lab.bench.gemm", "run")]),
    "bench schedulers": ([], [("nntile_lab.bench.schedulers", "run")]),
    "bench depth": ([], [("nntile_lab.bench.depth", "run")]),
    "bench memory": ([], [("nntile_lab.bench.memory", "run"),
                          ("nntile_lab.bench.memory", "run_hints"),
                          ("nntile_lab.bench.memory", "run_precisions")]),
    "collectives": ([], [("nntile_lab.proxies.collectives", "run")]),
    "proxy": (["gpt2"], [("nntile_lab.proxies.replay", "launch"),
                          ("nntile_lab.proxies.models", "build")]),
    "prepare": (["--out", "/tmp/nl-fuzz-prepare", "/nonexistent/nl-fuzz-in"],
                [("nntile_lab.data.cli", "prepare"),
                 ("nntile_lab.data.cli", "prepare_wikitext")]),
    "trace": (["--out", "/tmp/nl-fuzz-trace"], [("nntile_lab.trace.cli", "run_training")]),
    # the trainer's options after trace's ``--`` (their own parser)
    "trace --": (["--out", "/tmp/nl-fuzz-trace"], [("nntile_lab.trace.cli", "run_training")]),
    "peak": ([], [("nntile_lab.sgemm_peak", "cached"),
                  ("nntile_lab.precision_peak", "measure")]),
    "bench kernels": ([], [("nntile_lab.bench.kernels", "run")]),
    "bench trace-overhead": ([], [("nntile_lab.trace.overhead", "measure")]),
    "bench submit-cost": ([], [("nntile_lab.bench.submit_cost", "measure")]),
    "bench generate": ([], [("nntile_lab.bench.generate", "measure")]),
    # every option is checked before the weights are read
    "sample": (["--from", "/nonexistent/nl-fuzz-run"], [("nntile_lab.sample.cli",
                                                         "read_weights")]),
    "bench tune": ([], [("nntile_lab.bench.tune", "run")]),
    "tune": (["--cache", "/tmp/nl-fuzz-cache", "--out", "/tmp/nl-fuzz-tune"],
             [("nntile_lab.tune", "tune")]),
}


def public_commands(parser=None, path=()):
    """Every public leaf subcommand of ``nntile-lab`` ("bench gemm", "train", ...), from
    the parser that ``nntile_lab.cli.COMMANDS`` builds (hidden ``_`` ones left out)."""
    parser = parser or cli.build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [" ".join(path)]
    return [c for name, p in subs[0].choices.items() if not name.startswith("_")
            for c in public_commands(p, (*path, name))]


def test_every_public_subcommand_is_fuzzed():
    missing = sorted(set(public_commands()) - set(COMMANDS))
    assert not missing, f"add these subcommands to COMMANDS: {missing}"


def options(command: str):
    """(flag, type, nargs) of every valued option of ``command``."""
    parser = cli.build_parser()
    if command == "trace --":
        parser = importlib.import_module("nntile_lab.trace.cli").train_args_parser()
    for word in command.split() if command != "trace --" else ():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    out = []
    for a in parser._actions:
        if not a.option_strings or a.nargs == 0 or isinstance(a, argparse._HelpAction):
            continue
        if a.dest in ("data", "out", "resume", "cache", "from_dir", "record", "ooc_dir",
                      "plot", "wikitext") and (command, a.dest) != ("proxy", "data"):
            continue   # paths: tests/faults/test_cli_faults.py and below
        out.append((a.option_strings[0], kind_of(a.type), a.nargs))
    return out


def kind_of(parse):
    """int, float or str: what the option's argparse type reads (nntile_lab.options' range
    types are named after it)."""
    name = getattr(parse, "__name__", None)
    return {"int": int, "float": float}.get(name, str)


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


# what every fuzzed call gave (printed at the end of the module, ``pytest -s`` shows it):
# clear (exit 2 naming the option), accepted (a valid value), hang, wrong (garbage
# accepted, or an exit code outside the convention), unclear (a traceback, an internal
# name, or an exit 2 not naming the option)
TALLY: collections.Counter = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def tally():
    yield TALLY
    print(f"\noption fuzz: {sum(TALLY.values())} calls: "
          + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))


def verdict(flag, kind, value, rc, err) -> str:
    last = err.strip().splitlines()[-1] if err.strip() else ""   # not argparse's usage
    if rc == "hang":
        return "hang"
    if rc not in (0, 1, 2, "reached") or (must_refuse(flag, kind, value) and rc != 2):
        return "wrong"
    if any(word in err for word in INTERNAL):
        return "unclear"
    if rc == 2 and "/nonexistent/nl-fuzz" not in last:
        named = flag in last or flag.lstrip("-").replace("-", "_") in last
        return "clear" if named else "unclear"
    return "clear" if rc == 2 else "accepted"


def call(argv):
    err = io.StringIO()
    old = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError()))
    # after 20 s, again every second: a TimeoutError raised inside a gc callback is
    # swallowed as unraisable (CI saw it), and a one-shot alarm would then bound nothing
    signal.setitimer(signal.ITIMER_REAL, 20, 1)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:   # argparse's usage errors
                rc = exc.code
            except Reached:
                rc = "reached"
            except TimeoutError:
                rc = "hang"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return rc, err.getvalue()


@pytest.fixture
def no_work(monkeypatch):
    for targets in COMMANDS.values():
        for module, name in targets[1]:
            monkeypatch.setattr(importlib.import_module(module), name, _reached)
    # train --ranks/--hosts starts mpirun: the launch line is checked, never run
    monkeypatch.setattr(importlib.import_module("nntile_lab.parallel.launch"), "subprocess",
                        types.SimpleNamespace(run=_reached, Popen=_reached,
                                              PIPE=None))


@pytest.mark.parametrize("command,flag,kind,nargs", CASES,
                         ids=[f"{c}{f}" for c, f, *_ in CASES])
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_option_refuses_garbage_clearly(no_work, monkeypatch, command, flag, kind, nargs,
                                              data):
    value = data.draw(values(kind), label=flag)
    argv = [*command.split(), f"{flag}={value}", *COMMANDS[command][0]]
    if command == "trace --":   # trace's own options first, the trainer's after --
        argv = ["trace", *COMMANDS[command][0], "--", f"{flag}={value}"]
    monkeypatch.setattr(sys, "argv", ["nntile-lab", *argv])   # as the shell would start it
    rc, err = call(argv)
    TALLY[verdict(flag, kind, value, rc, err)] += 1
    assert rc != "hang", (argv, err)
    assert rc in (0, 1, 2, "reached"), (argv, rc, err)
    assert not any(word in err for word in INTERNAL), (argv, err)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    if rc == 2:   # one line (docs/cli.md), never argparse's usage block
        assert len(err.strip().splitlines()) == 1 and "usage:" not in err, (argv, err)
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


# Text options with a fixed vocabulary: a word outside it is refused at the boundary. Not
# sweep's (a grid value outside it is a failed point, a row of the result) nor proxy's (its
# vocabulary is checked in models.build, which the fuzz replaces).
VOCABULARY = ("--scheduler", "--schedulers", "--ops", "--hint-set", "--hints", "--only",
              "--priorities")
WORDS = [(c, f) for c, f, kind, _ in CASES
         if f in VOCABULARY and kind is str and c not in ("sweep", "proxy")]


@pytest.mark.parametrize("command,flag", WORDS, ids=[f"{c}{f}" for c, f in WORDS])
@pytest.mark.parametrize("word", ["abc", "∞", "lws,abc"])
def test_a_word_outside_the_vocabulary_is_refused(no_work, monkeypatch, command, flag, word):
    argv = [*command.split(), f"{flag}={word}", *COMMANDS[command][0]]
    if command == "trace --":
        argv = ["trace", *COMMANDS[command][0], "--", f"{flag}={word}"]
    monkeypatch.setattr(sys, "argv", ["nntile-lab", *argv])
    rc, err = call(argv)
    TALLY[verdict(flag, str, word, rc, err) if rc == 2 else "wrong"] += 1
    assert rc == 2 and flag in err, (argv, rc, err)


HINT_FLAGS = [(c, f) for c, f, kind, _ in CASES if f in ("--hints", "--hint-set")]


@pytest.mark.parametrize("command,flag", HINT_FLAGS, ids=[f"{c}{f}" for c, f in HINT_FLAGS])
@pytest.mark.parametrize("word", ["none", "all", "auto"])
def test_a_hint_set_name_in_a_list_is_one_clear_error(no_work, monkeypatch, command, flag,
                                                      word):
    """``--hints none,invalidate`` called 'none' unknown, then listed it as valid (issue
    33): a set's name stands alone, and the one line says so, with the value and the fix."""
    argv = [*command.split(), f"{flag}=invalidate,{word}", *COMMANDS[command][0]]
    if command == "trace --":
        argv = ["trace", *COMMANDS[command][0], "--", f"{flag}=invalidate,{word}"]
    monkeypatch.setattr(sys, "argv", ["nntile-lab", *argv])
    rc, err = call(argv)
    lines = err.strip().splitlines()
    # sweep's --hints is a grid axis: a value no point can take fails the sweep (exit 1),
    # as any grid value outside the vocabulary does
    assert rc == (1 if command == "sweep" else 2) and len(lines) == 1, (argv, rc, err)
    assert flag in err and f"invalidate,{word}" in err, err
    assert f"'{word}' stands alone" in err and "unknown" not in err, err
    assert f"give '{word}' or a comma list of invalidate" in err, err
