"""Finding and streaming text files.

Inputs are read as exact UTF-8 (no newline translation), so the stored tokens decode back to
the files byte for byte.  Directory walks skip hidden entries (``.git``) and files that are not
text (a NUL byte or invalid UTF-8 in the first block), since a source tree usually mixes
both; a file named explicitly must be text, and saying otherwise is an error.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

_SNIFF_BYTES = 8192
_BLOCK_CHARS = 1 << 20


def is_text_file(path: Path) -> bool:
    """True if the first block of ``path`` has no NUL byte and decodes as UTF-8."""
    return utf8_problem(path) is None


def utf8_problem(path: Path) -> str | None:
    """Why ``path`` is not UTF-8 text (from its first block), or None: "binary" (a NUL
    byte), else where its first invalid byte is (text in another encoding, often)."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if b"\0" in head:
        return "binary"
    try:
        # A short head is the whole file: then a cut-off character is an error too.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < _SNIFF_BYTES)
    except UnicodeDecodeError as e:
        return f"byte 0x{head[e.start]:02x} at offset {e.start} is not UTF-8"
    return None


def not_utf8_hint(path: Path, problem: str) -> str:
    """The sentence for a file that is text in another encoding, with the fix."""
    return (f"{path} is text but not UTF-8 ({problem}; Latin-1 or Windows-1252, perhaps): "
            f"convert it, e.g. `iconv -f latin1 -t utf-8 {path} > {path}.utf8`, and prepare "
            "that (its bytes are stored as they are, so they must be UTF-8)")


def _norm_ext(ext: str) -> str:
    return ext.lower() if ext.startswith(".") else f".{ext.lower()}"


def collect_text_files(
    inputs: Iterable[str | os.PathLike], extensions: Iterable[str] | None = None
) -> tuple[list[Path], list[Path]]:
    """Expand files and directories into ``(text_files, skipped_files)``, in a stable order.

    Explicit files keep their given order; each directory contributes its files recursively,
    sorted by relative path.  ``extensions`` (e.g. ``[".txt", "md"]``) filters directory
    contents only.
    """
    exts = None if extensions is None else {_norm_ext(e) for e in extensions}
    files: list[Path] = []
    skipped: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_file():
            problem = utf8_problem(path)
            if problem == "binary":
                raise ValueError(f"input {path} is not a text file (it has NUL bytes)")
            if problem:
                raise ValueError(f"input {not_utf8_hint(path, problem)}")
            files.append(path)
        elif path.is_dir():
            for f in sorted(_walk(path), key=lambda p: p.relative_to(path).as_posix()):
                if exts is not None and f.suffix.lower() not in exts:
                    continue
                (files if is_text_file(f) else skipped).append(f)
        else:
            raise FileNotFoundError(f"input {path} does not exist")
    return files, skipped


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith("."):
                yield Path(dirpath) / name


def iter_text_blocks(path: Path) -> Iterator[str]:
    """Stream the exact UTF-8 text of ``path`` in blocks (multi-byte characters stay whole)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            while block := f.read(_BLOCK_CHARS):
                yield block
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid UTF-8 text ({e.reason})") from e
