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
