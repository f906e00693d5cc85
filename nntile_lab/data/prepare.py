"""Turn any text into a nanoGPT-style dataset directory (``nntile-lab prepare``: data.cli).

Each input file is one document: its tokens are followed by ``<|endoftext|>`` (as nanoGPT's
OpenWebText preparation does), so the model learns where documents end rather than reading
one file running into the next.  The resulting token stream is split by position: the last
``val_fraction`` of it becomes ``val.bin``.  A positional split works for a single file (a
novel, a log) as well as for a directory, and keeps validation text disjoint from training.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from nntile_lab.data.store import write_dataset
from nntile_lab.data.textfiles import (
    collect_text_files,
    iter_text_blocks,
    not_utf8_hint,
    utf8_problem,
)
from nntile_lab.data.tokenizer import EOT_ID, encode_stream

_EOT = np.array([EOT_ID], dtype=np.uint16)


def encode_files(files: Iterable[Path]) -> np.ndarray:
    """Tokens of each file followed by ``<|endoftext|>``, concatenated (uint16)."""
    parts = []
    for f in files:
        parts += [encode_stream(iter_text_blocks(f)), _EOT]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint16)


def prepare(
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    val_fraction: float = 0.1,
    extensions: Iterable[str] | None = None,
) -> dict:
    """Tokenise ``inputs`` (files and/or directories) into ``out_dir``; return its meta.

    Directories are walked recursively (text files only, sorted; ``extensions`` filters them).
    Files inside ``out_dir`` are ignored, so preparing a tree into a subdirectory of itself is
    safe.  Writes ``train.bin``, ``val.bin`` and ``meta.json``, each atomically.
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be strictly between 0 and 1, got {val_fraction}")
    inputs = [Path(i) for i in inputs]
    extensions = None if extensions is None else list(extensions)
    if not inputs:
        raise ValueError("no inputs given: name text files or directories to prepare")
    files, skipped = collect_text_files(inputs, extensions)
    out = Path(out_dir).resolve()
    files = [f for f in files if not f.resolve().is_relative_to(out)]
    if not files:
        wanted = "" if extensions is None else f" with extensions {sorted(extensions)}"
        # a skipped file that is text in another encoding (no NUL byte) is named, with the fix
        other = [(f, p) for f in skipped if (p := utf8_problem(f)) != "binary"]
        raise ValueError(
            f"no UTF-8 text files{wanted} found in {[str(i) for i in inputs]} "
            f"({len(skipped)} other file(s) skipped"
            + (f"; {len(other)} of them look like text in another encoding: "
               f"{not_utf8_hint(*other[0])})" if other else ")")
        )
    tokens = encode_files(files)
    n_val = round(len(tokens) * val_fraction)
    return write_dataset(
        out_dir,
        tokens[: len(tokens) - n_val],
        tokens[len(tokens) - n_val:],
        source="files",
        val_fraction=val_fraction,
        sources=[str(f) for f in files],
        skipped_non_text=len(skipped),
    )
