"""argparse types that check a value's range where it is typed: ``--repeats 0`` is a
usage error naming the option, the value and the range, not a failure deep in the work."""
from __future__ import annotations

import argparse
import re

from nntile_lab.errors import UsageError

INT_MAX = 2**31 - 1   # sizes and counts reach C as 32-bit ints


class OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors as the one line docs/cli.md promises (argparse prints its
    whole usage block, 20 lines for ``train``, above the message), with where to look."""

    def error(self, message: str):
        # the hidden subcommands (``_replay-rank``: processes the work starts) are no choice
        message = re.sub(r", '_[^']*'|'_[^']*', ", "", message)
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        # an unknown option is the subcommand's (argparse blames the top parser): named by
        # the deepest subparser the words before it chose
        namespace, extra = self.parse_known_args(args, namespace)
        if extra:
            self._deepest(args or []).error(f"unrecognized arguments: {' '.join(extra)}")
        namespace.options_given = self._given(args)
        namespace.command_name = self._deepest(args or []).prog
        return namespace

    def _given(self, args) -> dict[str, str]:
        """dest → the option string, of every option the command line gave (parsed again
        with no defaults: a value equal to the default counts as given too)."""
        saved = []
        todo = [self]
        while todo:
            parser = todo.pop()
            saved.append((parser, parser._defaults, [(a, a.default) for a in parser._actions]))
            parser._defaults = {}
            for a in parser._actions:
                a.default = argparse.SUPPRESS
                if isinstance(a, argparse._SubParsersAction):
                    todo += a.choices.values()
        try:
            bare, _ = argparse.ArgumentParser.parse_known_args(self, args)
        finally:
            for parser, defaults, actions in saved:
                parser._defaults = defaults
                for a, default in actions:
                    a.default = default
        flags = {a.dest: max(a.option_strings, key=len) for p, _, actions in saved
                 for a, _ in actions if a.option_strings}
        return {dest: flags[dest] for dest in vars(bare) if dest in flags}

    def _deepest(self, words: list[str]) -> argparse.ArgumentParser:
        parser = self
        for word in words:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs or word not in subs[0].choices:
                break
            parser = subs[0].choices[word]
        return parser


def int_range(lo: int = 1, hi: int = INT_MAX):
    """An argparse ``type``: an integer from ``lo`` to ``hi``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range: give an integer from "
                                             f"{lo} to {hi:,}")
        return value
    parse.__name__ = "int"   # argparse names the type in its own messages
    return parse


def float_range(lo: float = 0.0, hi: float = float("inf"), *, lo_open: bool = False,
                hi_open: bool = False):
    """An argparse ``type``: a finite number from ``lo`` to ``hi`` (``*_open``: excluded)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        above = value > lo if lo_open else value >= lo
        below = value < hi if hi_open else value <= hi
        if value != value or abs(value) == float("inf") or not (above and below):
            left, right = "(" if lo_open else "[", ")" if hi_open or hi == float("inf") else "]"
            raise argparse.ArgumentTypeError(f"{text} is out of range: give a number in "
                                             f"{left}{lo:g}, {hi:g}{right}")
        return value
    parse.__name__ = "float"
    return parse


def int_list(lo: int = 1, hi: int = INT_MAX):
    """An argparse ``type``: a comma list of integers from ``lo`` to ``hi`` (kept as text)."""
    one = int_range(lo, hi)

    def parse(text: str) -> str:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} gives no values: a comma list of "
                                             f"integers from {lo} to {hi:,}")
        for p in parts:
            one(p)
        return text
    parse.__name__ = "comma list"
    return parse


def refuse_given(args, dests, why: str) -> None:
    """A usage error naming the first of ``dests`` the command line gave (``args.options_given``,
    set by ``OneLineParser``): an option that would be silently ignored (``why``: when it
    applies, e.g. "applies only with --device")."""
    given = getattr(args, "options_given", {})
    for dest in dests:
        if dest in given:
            raise UsageError(f"{given[dest]} {why}")
