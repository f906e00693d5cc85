"""nanoGPT's ``train.bin`` / ``val.bin`` token files.

The format is nothing but a flat stream of uint16 token ids (GPT-2's 50257 ids fit), so a file
can be memory-mapped and a batch is a handful of random slices: the corpus never has to fit
in RAM and startup costs nothing.  Files are written atomically (temporary file in the same
directory, fsync, ``os.replace``) so an interrupted ``prepare`` never leaves a truncated file
that a later training run would silently read.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

TOKEN_DTYPE = np.dtype(np.uint16)
SPLITS = ("train", "val")
_FIX = "run `nntile-lab prepare` to (re)create it"


def atomic_write_bytes(path: str | os.PathLike, data: bytes | memoryview) -> Path:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_tokens(path: str | os.PathLike, tokens) -> Path:
    """Atomically write ``tokens`` (any integer sequence in [0, 65535]) as a uint16 token file."""
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"tokens must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"tokens must be integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(TOKEN_DTYPE).max):
        raise ValueError(
            f"token ids must lie in [0, 65535] to be stored as uint16, got range "
            f"[{arr.min()}, {arr.max()}]"
        )
    arr = np.ascontiguousarray(arr, dtype=TOKEN_DTYPE)
    return atomic_write_bytes(path, memoryview(arr).cast("B"))


class TokenBin:
    """A read-only, memory-mapped uint16 token file with batch samplers for training."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"token file {self.path} does not exist; {_FIX}")
        size = self.path.stat().st_size
        if size == 0 or size % TOKEN_DTYPE.itemsize:
            raise ValueError(
                f"token file {self.path} has {size} bytes, but a uint16 token file needs a "
                f"positive, even size; it is empty or truncated: {_FIX}"
            )
        self.tokens = np.memmap(self.path, dtype=TOKEN_DTYPE, mode="r")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def __repr__(self) -> str:
        return f"TokenBin({str(self.path)!r}, tokens={len(self)})"

    def _check_window(self, batch: int, seq_len: int, needed: int) -> None:
        for name, value in (("batch", batch), ("seq_len", seq_len)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if len(self) < needed:
            raise ValueError(
                f"token file {self.path} holds {len(self)} tokens, fewer than the {needed} "
                f"needed for batch={batch}, seq_len={seq_len}; use a shorter seq_len/batch "
                f"or more text"
            )

    def _windows(self, starts: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        window = self.tokens[starts[:, None] + np.arange(seq_len + 1)].astype(np.int64)
        return np.ascontiguousarray(window[:, :-1]), np.ascontiguousarray(window[:, 1:])

    def sample_batch(
        self, batch: int, seq_len: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``batch`` random windows: ``(input_ids, labels)``, both int64 ``(batch, seq_len)``.

        ``labels[:, t] == input_ids[:, t + 1]`` within a window (next-token targets).  All
        randomness comes from ``rng``, so saving ``rng.bit_generator.state`` with a checkpoint
        makes a resumed run draw exactly the batches the uninterrupted run would have drawn.
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self._check_window(batch, seq_len, seq_len + 1)
        starts = rng.integers(0, len(self) - seq_len, size=batch)
        return self._windows(starts, seq_len)

    def num_sequential_batches(self, batch: int, seq_len: int) -> int:
        """How many full batches ``sequential_batches(batch, seq_len)`` yields."""
        self._check_window(batch, seq_len, batch * seq_len + 1)
        return (len(self) - 1) // seq_len // batch

    def sequential_batches(
        self, batch: int, seq_len: int, max_batches: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield deterministic ``(input_ids, labels)`` batches for evaluation.

        Input windows tile the file from the start without overlap (window ``i`` reads tokens
        ``[i*seq_len, (i+1)*seq_len]``, its last one only as a label), so every token is scored
        once.  Only full batches are yielded, keeping tensor shapes fixed; the leftover tail
        is dropped.  ``max_batches`` caps the count for quick evaluations.
        """
        n = self.num_sequential_batches(batch, seq_len)
        if max_batches is not None:
            if max_batches < 1:
                raise ValueError(f"max_batches must be >= 1 or None, got {max_batches}")
            n = min(n, max_batches)
        return self._sequential(batch, seq_len, n)

    def _sequential(
        self, batch: int, seq_len: int, n: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        offsets = np.arange(batch) * seq_len
        for i in range(n):
            yield self._windows(i * batch * seq_len + offsets, seq_len)


def split_path(data_dir: str | os.PathLike, split: str) -> Path:
    """``DIR/train.bin`` or ``DIR/val.bin``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return Path(data_dir) / f"{split}.bin"


def load_split(data_dir: str | os.PathLike, split: str) -> TokenBin:
    """Open ``DIR/train.bin`` or ``DIR/val.bin`` as a ``TokenBin``."""
    return TokenBin(split_path(data_dir, split))
