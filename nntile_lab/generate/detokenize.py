"""Text from a stream of GPT-2 token ids, piece by piece as they come.

A GPT-2 token is a run of bytes, not of characters: "é" or an emoji can be split over two
or three tokens, and decoding each token alone would print replacement characters. The
streaming decoder keeps the bytes of an unfinished UTF-8 character until the token that
completes it arrives (Python's incremental UTF-8 decoder); bytes that can never form a
character become U+FFFD, as ``tiktoken``'s ``decode`` does. So the pieces joined are
exactly ``decode(all_ids)``, and nothing is printed late by more than one character.
"""
from __future__ import annotations

import codecs

from nntile_lab.data.tokenizer import get_encoding


class StreamDecoder:
    """``piece = dec.push(token_id)`` → the text that token completes ('' while a character
    is unfinished); ``dec.flush()`` → whatever is left at the end."""

    def __init__(self, encoding=None):
        self._enc = encoding or get_encoding()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""          # everything returned so far

    def push(self, token_id: int) -> str:
        piece = self._utf8.decode(self._enc.decode_single_token_bytes(int(token_id)))
        self.text += piece
        return piece

    def push_many(self, ids) -> str:
        return "".join(self.push(t) for t in ids)

    def flush(self) -> str:
        piece = self._utf8.decode(b"", final=True)
        self.text += piece
        return piece
