"""When a row stops: after ``max_new_tokens`` tokens, or once it generated a stop token or
a stop sequence (which is kept in its output, as Hugging Face keeps its ``eos``).

``stop`` (``generate(..., stop=...)``) is a token id, a list of token ids (any of them ends
the row) or a list mixing ids and sequences of ids (``[50256, [13, 198]]``: the end-of-text
token, or "." followed by a newline). Stop *strings* are a matter of text: the text layer
(``generate.text``) turns them into a check on the decoded text.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class StopTokens:
    """The stop sequences of a generation (each a tuple of token ids), checked against
    the tokens each row generated so far."""

    def __init__(self, stop=None, vocab_size: int | None = None):
        self.sequences: tuple[tuple[int, ...], ...] = _sequences(stop, vocab_size)

    def __bool__(self) -> bool:
        return bool(self.sequences)

    def hit(self, generated: Sequence[int]) -> bool:
        """Whether ``generated`` (a row's new tokens) ends with a stop sequence."""
        n = len(generated)
        for seq in self.sequences:
            k = len(seq)
            if k <= n and tuple(int(t) for t in generated[n - k:]) == seq:
                return True
        return False


def _sequences(stop, vocab_size):
    if stop is None:
        return ()
    items = list(stop) if isinstance(stop, (Sequence, np.ndarray)) \
        and not isinstance(stop, (str, bytes)) else [stop]
    out = []
    for item in items:
        if _is_id(item) or not isinstance(item, (Sequence, np.ndarray)) \
                or isinstance(item, (str, bytes)):
            seq = (item,)
        else:
            seq = tuple(item)
        if not seq:
            raise ValueError("stop: an empty stop sequence would stop every row at once; "
                             "give token ids or sequences of them")
        for t in seq:
            if not _is_id(t):
                raise ValueError(f"stop: {t!r} is not a token id (an integer); stop takes ids "
                                 "or sequences of ids (stop strings: generate.text)")
            if t < 0 or (vocab_size is not None and t >= vocab_size):
                raise ValueError(f"stop: token id {int(t)} is outside the vocabulary: ids must "
                                 f"be in [0, {vocab_size})")
        out.append(tuple(int(t) for t in seq))
    return tuple(out)


def _is_id(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


class StopStrings:
    """Stop *strings*: a row stops once its decoded text contains one (kept in the output,
    as the tokens of a stop sequence are). ``decode`` turns token ids into text (the GPT-2
    BPE's ``decode``)."""

    def __init__(self, strings, decode):
        self.strings = tuple(strings or ())
        for s in self.strings:
            if not isinstance(s, str) or not s:
                raise ValueError(f"stop string {s!r} must be a non-empty string")
        self._decode = decode

    def __bool__(self) -> bool:
        return bool(self.strings)

    def hit(self, generated: Sequence[int]) -> bool:
        if not self.strings or not generated:
            return False
        text = self._decode(list(generated))
        return any(s in text for s in self.strings)


class AnyStop:
    """Stops a row when any of its conditions does."""

    def __init__(self, *conditions):
        self.conditions = [c for c in conditions if c]

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def hit(self, generated: Sequence[int]) -> bool:
        return any(c.hit(generated) for c in self.conditions)
