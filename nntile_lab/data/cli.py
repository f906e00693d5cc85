"""``nntile-lab prepare``: tokenise text files, or a local WikiText-103, into a dataset."""
from __future__ import annotations

import argparse
import json
import sys

from nntile_lab.data.prepare import prepare
from nntile_lab.data.wikitext import prepare_wikitext


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
