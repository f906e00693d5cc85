"""WikiText-103 from a local copy, tokenised once into ``train.bin`` / ``val.bin``.

Two layouts are recognised anywhere below the given directory:

* the original release: ``wiki.train.raw`` and ``wiki.valid.raw`` (``wiki.test.raw`` is not
  used: nanoGPT's format has two splits);
* the Hugging Face parquet export of ``wikitext-103-raw-v1``: ``train-*.parquet`` and
  ``validation-*.parquet`` (or ``train/*.parquet``, ``validation/*.parquet``), column ``text``.
  Reading them needs the optional ``pyarrow`` package.

WikiText is one continuous stream of articles, and GPT-2 was evaluated on it as such, so each
split is kept as one stream closed by a single ``<|endoftext|>``.  Parquet rows are the raw
file's lines, except that Hugging Face stored blank lines (`` \\n`` in the raw files) as empty
strings; they are restored, so both layouts give identical tokens.

Tokenising WikiText-103 takes minutes, so the result is cached: a later call with unchanged
source files (same paths, sizes and mtimes) reuses the token files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nntile_lab.data.store import cached_meta, fingerprint, write_dataset
from nntile_lab.data.textfiles import iter_text_blocks
from nntile_lab.data.tokenizer import EOT_ID, encode_stream

RAW_NAMES = {"train": "wiki.train.raw", "val": "wiki.valid.raw"}
PARQUET_SPLITS = {"train": "train", "val": "validation"}
PREFERRED_CONFIG = "wikitext-103-raw-v1"
_RAW_BLANK_LINE = " \n"


@dataclass(frozen=True)
class WikiTextFiles:
    """The files found for each split (``"train"``, ``"val"``) and their layout."""

    layout: str  # "raw" or "parquet"
    splits: dict[str, list[Path]]


def find_wikitext(root: str | os.PathLike) -> WikiTextFiles:
    """Locate WikiText-103 below ``root``, preferring the raw files over parquet."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"WikiText directory {root} does not exist")
    raw = {split: _pick_raw(root, name) for split, name in RAW_NAMES.items()}
    if all(raw.values()):
        return WikiTextFiles("raw", {split: [f] for split, f in raw.items()})
    parquet = _find_parquet(root)
    if all(parquet.get(split) for split in PARQUET_SPLITS.values()):
        return WikiTextFiles(
            "parquet", {split: parquet[hf] for split, hf in PARQUET_SPLITS.items()}
        )
    found = [f.relative_to(root).as_posix() for f in raw.values() if f]
    found += [f"{len(fs)} {hf} parquet file(s)" for hf, fs in parquet.items() if fs]
    raise FileNotFoundError(
        f"no WikiText-103 under {root}: looked (recursively) for wiki.train.raw + "
        "wiki.valid.raw, or Hugging Face parquet files train-*.parquet + "
        f"validation-*.parquet with a 'text' column; found {found or 'none of them'}"
    )


def _prefer_103(matches: list[Path], root: Path) -> list[Path]:
    preferred = [m for m in matches if "103" in m.relative_to(root).as_posix()]
    return preferred or matches


def _pick_raw(root: Path, name: str) -> Path | None:
    matches = _prefer_103(sorted(root.rglob(name)), root)
    if len(matches) > 1:
        listed = ", ".join(str(m) for m in matches)
        raise ValueError(f"several {name} under {root} ({listed}); point at one directory")
    return matches[0] if matches else None


def _find_parquet(root: Path) -> dict[str, list[Path]]:
    """Parquet files by Hugging Face split name, from a single dataset config."""
    by_config: dict[str, dict[str, list[Path]]] = {}
    for f in sorted(root.rglob("*.parquet")):
        split = _parquet_split(f)
        if split is None:
            continue
        parts = f.relative_to(root).parts
        config = next((p for p in parts if p.startswith("wikitext-")), "")
        by_config.setdefault(config, {}).setdefault(split, []).append(f)
    if len(by_config) > 1:
        if PREFERRED_CONFIG not in by_config:
            raise ValueError(
                f"parquet files of several WikiText configs under {root} "
                f"({sorted(by_config)}); point at one of them, ideally {PREFERRED_CONFIG}"
            )
        return by_config[PREFERRED_CONFIG]
    return next(iter(by_config.values()), {})


def _parquet_split(f: Path) -> str | None:
    for name in (f.stem.split("-")[0], f.parent.name):
        if name in ("train", "validation", "test"):
            return name
    return None


def _parquet_lines(files: list[Path]) -> Iterator[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError(
            "reading WikiText-103 parquet files needs pyarrow: pip install pyarrow "
            "(or provide the raw wiki.train.raw / wiki.valid.raw files instead)"
        ) from e
    for f in files:
        pf = pq.ParquetFile(f)
        if "text" not in pf.schema_arrow.names:
            raise ValueError(f"{f} has no 'text' column (columns: {pf.schema_arrow.names})")
        for batch in pf.iter_batches(columns=["text"]):
            for line in batch.column(0).to_pylist():
                yield line or _RAW_BLANK_LINE


def _encode_split(layout: str, files: list[Path]) -> np.ndarray:
    if layout == "raw":
        tokens = encode_stream(block for f in files for block in iter_text_blocks(f))
    else:
        tokens = encode_stream(_parquet_lines(files))
    return np.append(tokens, np.uint16(EOT_ID))


def prepare_wikitext(src_dir: str | os.PathLike, out_dir: str | os.PathLike) -> dict:
    """Tokenise the WikiText-103 copy below ``src_dir`` into ``out_dir``; return the meta.

    Reuses ``out_dir`` as is when it already holds this exact source's tokens.
    """
    found = find_wikitext(src_dir)
    sources = [f for split in ("train", "val") for f in found.splits[split]]
    fp = fingerprint([f.resolve() for f in sources], layout=found.layout)
    meta = cached_meta(out_dir, fp)
    if meta is not None:
        return meta
    return write_dataset(
        out_dir,
        _encode_split(found.layout, found.splits["train"]),
        _encode_split(found.layout, found.splits["val"]),
        source="wikitext103",
        layout=found.layout,
        sources=[str(f) for f in sources],
        fingerprint=fp,
    )
