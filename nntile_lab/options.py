"""argparse types that check a value's range where it is typed: ``--repeats 0`` is a
usage error naming the option, the value and the range, not a failure deep in the work."""
from __future__ import annotations

import argparse

INT_MAX = 2**31 - 1   # sizes and counts reach C as 32-bit ints


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
