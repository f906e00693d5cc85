"""Turn any text into a nanoGPT-style dataset directory, and the ``prepare`` CLI command.

Each input file is one document: its tokens are followed by ``<|endoftext|>`` (as nanoGPT's
OpenWebText preparation does), so the model learns where documents end rather than reading
one file running into the next.  The resulting token stream is split by position: the last
``val_fraction`` of it becomes ``val.bin``.  A positional split works for a single file (a
novel, a log) as well as for a directory, and keeps validation text disjoint from training.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from nntile_lab.data.store import write_dataset
from nntile_lab.data.textfiles import collect_text_files, iter_text_blocks
from nntile_lab.data.tokenizer import EOT_ID, encode_stream
from nntile_lab.data.wikitext import prepare_wikitext

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
        raise ValueError(
            f"no text files{wanted} found in {[str(i) for i in inputs]} "
            f"({len(skipped)} non-text file(s) skipped)"
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


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``prepare`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "prepare",
        help="tokenise text into train.bin / val.bin",
        description="Tokenise text files/directories (or a local WikiText-103 copy) with "
        "GPT-2 BPE into DIR/train.bin, DIR/val.bin and DIR/meta.json.",
    )
    p.add_argument("inputs", nargs="*", metavar="DIR_OR_FILE",
                   help="text files or directories (searched recursively)")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--val-fraction", type=float, default=None, metavar="F",
                   help="share of the token stream kept for validation (default 0.1)")
    p.add_argument("--ext", action="append", dest="extensions", metavar="EXT",
                   help="only take directory files with this extension (repeatable)")
    p.add_argument("--wikitext", metavar="DIR",
                   help="prepare WikiText-103 from a local directory (raw or parquet files) "
                   "instead of DIR_OR_FILE inputs")
    p.add_argument("--json", action="store_true", help="print the meta as one JSON object")
    p.set_defaults(func=run_cli)
    return p


def run_cli(args: argparse.Namespace) -> int:
    """Run ``prepare`` for parsed arguments; return the process exit code."""
    if bool(args.inputs) == bool(args.wikitext):
        return _fail("give either DIR_OR_FILE inputs or --wikitext DIR (exactly one)", 2)
    if args.wikitext and (args.val_fraction is not None or args.extensions):
        return _fail("--val-fraction and --ext apply to DIR_OR_FILE inputs; WikiText-103 "
                     "has its own validation split", 2)
    try:
        if args.wikitext:
            meta = prepare_wikitext(args.wikitext, args.out)
        else:
            frac = 0.1 if args.val_fraction is None else args.val_fraction
            meta = prepare(args.inputs, args.out, val_fraction=frac, extensions=args.extensions)
    except (OSError, ValueError, ImportError) as e:
        return _fail(str(e), 1)
    if args.json:
        print(json.dumps(meta, separators=(",", ":")))
    else:
        print(f"{args.out}: train.bin {meta['train_tokens']} tokens, val.bin "
              f"{meta['val_tokens']} tokens ({meta['tokenizer']}, source {meta['source']})")
    return 0


def _fail(message: str, code: int) -> int:
    print(f"nntile-lab prepare: error: {message}", file=sys.stderr)
    return code
