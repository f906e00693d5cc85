"""The default training corpus: the Python standard library's own source code.

Why this text: it is on every machine that can run this project (no download, no network,
no data set to ship), it is real, human-written text, a mix of English prose (docstrings,
comments) and code that GPT-2's BPE handles well, it is PSF-licensed, and for a given Python
installation it is fixed, so runs and their losses are reproducible.  Test suites
(``test/``, ``tests/``, ``idle_test/``) are left out as repetitive, and installed third-party
packages (``site-packages``) because they differ between machines.

Files are taken in sorted relative-path order up to ``max_bytes``; the last
``VAL_FILE_FRACTION`` of them (at least one) form the validation split, so validation text
never appears in training.  The whole default-sized corpus tokenises in about a second.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from nntile_lab.data.prepare import encode_files
from nntile_lab.data.store import cached_meta, fingerprint, write_dataset

# CPython 3.11's stdlib without tests is ~12 MB (~5.7M GPT-2 tokens), under the cap, which
# only bounds the work on an unusually large installation.
DEFAULT_MAX_BYTES = 16 * 2**20
VAL_FILE_FRACTION = 0.05
_EXCLUDED_DIRS = frozenset(
    {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
)


def stdlib_dir() -> Path:
    """The directory holding the running Python's standard library sources."""
    return Path(sysconfig.get_paths()["stdlib"])


def default_corpus_files(max_bytes: int | None = DEFAULT_MAX_BYTES) -> list[Path]:
    """Standard-library ``*.py`` files in sorted order, up to about ``max_bytes`` in total.

    Files are added while the total is below ``max_bytes`` (so the last one may cross it, and
    a tiny cap still yields one file); ``None`` takes them all.
    """
    root = stdlib_dir()
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _EXCLUDED_DIRS]
        files += [Path(dirpath) / n for n in filenames if n.endswith(".py")]
    files.sort(key=lambda f: f.relative_to(root).as_posix())
    if max_bytes is None:
        return files
    chosen, total = [], 0
    for f in files:
        if total >= max_bytes:
            break
        chosen.append(f)
        total += f.stat().st_size
    return chosen


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/nntile_lab/stdlib-pyX.Y`` (``~/.cache`` when unset)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "nntile_lab" / f"stdlib-py{sys.version_info[0]}.{sys.version_info[1]}"


def prepare_default_corpus(
    out_dir: str | os.PathLike | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> Path:
    """Make sure ``out_dir`` (default: ``default_cache_dir()``) holds the stdlib corpus.

    Tokenises only when the directory lacks a dataset built from these very files; returns
    the directory, ready for ``load_split(dir, "train" | "val")``.
    """
    out_dir = default_cache_dir() if out_dir is None else Path(out_dir)
    files = default_corpus_files(max_bytes)
    if len(files) < 2:
        raise ValueError(
            f"the stdlib corpus needs at least 2 files for a train/val split, but "
            f"max_bytes={max_bytes} selects {len(files)} from {stdlib_dir()}"
        )
    fp = fingerprint(files, max_bytes=max_bytes)
    if cached_meta(out_dir, fp) is None:
        n_val = max(1, round(len(files) * VAL_FILE_FRACTION))
        root = stdlib_dir()
        write_dataset(
            out_dir,
            encode_files(files[:-n_val]),
            encode_files(files[-n_val:]),
            source="python-stdlib",
            python_version=sys.version.split()[0],
            max_bytes=max_bytes,
            stdlib_dir=str(root),
            train_files=len(files) - n_val,
            val_files=n_val,
            sources=[f.relative_to(root).as_posix() for f in files],
            fingerprint=fp,
        )
    return out_dir
