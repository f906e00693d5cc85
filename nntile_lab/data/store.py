"""A prepared dataset directory: ``train.bin``, ``val.bin`` and ``meta.json``.

``meta.json`` is written last, after both token files are safely in place, so its presence
marks a complete dataset.  It records a fingerprint of the sources; a builder that finds a
matching fingerprint and token files of the recorded sizes reuses them instead of
tokenising again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from nntile_lab.data.bins import TOKEN_DTYPE, atomic_write_bytes, split_path, write_tokens
from nntile_lab.data.tokenizer import ENCODING_NAME, EOT_ID, N_VOCAB

META_NAME = "meta.json"
FORMAT_VERSION = 1


def fingerprint(files: Iterable[Path], **settings) -> str:
    """A hash of the files' paths, sizes and mtimes plus the build settings."""
    entries = [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    blob = json.dumps(
        {"version": FORMAT_VERSION, "tokenizer": ENCODING_NAME, "files": entries,
         "settings": settings},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def read_meta(out_dir: str | os.PathLike) -> dict:
    """Load ``DIR/meta.json``."""
    path = Path(out_dir) / META_NAME
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cached_meta(out_dir: str | os.PathLike, fp: str) -> dict | None:
    """The stored meta if ``out_dir`` holds a complete dataset built with fingerprint ``fp``."""
    try:
        meta = read_meta(out_dir)
    except (OSError, ValueError):
        return None
    if meta.get("fingerprint") != fp:
        return None
    for split in ("train", "val"):
        f = split_path(out_dir, split)
        expected = meta.get(f"{split}_tokens", -1) * TOKEN_DTYPE.itemsize
        if not f.is_file() or f.stat().st_size != expected:
            return None
    return meta


def write_dataset(
    out_dir: str | os.PathLike, train: np.ndarray, val: np.ndarray, **meta_fields
) -> dict:
    """Write both splits and then ``meta.json``; return the meta dict."""
    for name, tokens in (("train", train), ("val", val)):
        if len(tokens) < 2:
            raise ValueError(
                f"the {name} split would hold {len(tokens)} token(s); at least 2 are needed "
                "(one input and its next-token label): give more text"
            )
    out_dir = Path(out_dir)
    (out_dir / META_NAME).unlink(missing_ok=True)  # the old meta must not vouch for new bins
    write_tokens(split_path(out_dir, "train"), train)
    write_tokens(split_path(out_dir, "val"), val)
    meta = {
        "format": f"nanogpt-{TOKEN_DTYPE.name}",
        "format_version": FORMAT_VERSION,
        "tokenizer": ENCODING_NAME,
        "n_vocab": N_VOCAB,
        "eot_token": EOT_ID,
        "train_tokens": int(len(train)),
        "val_tokens": int(len(val)),
        **meta_fields,
    }
    atomic_write_bytes(out_dir / META_NAME, (json.dumps(meta, indent=1) + "\n").encode())
    return meta
