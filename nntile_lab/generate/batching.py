"""Prompts of different lengths in one batch: left padding.

The prompts are aligned on the right: row ``b`` starts with ``pads[b]`` pad tokens, so every
row's last prompt token sits at the same place, the prefill's last position, and each
decode step writes the same cache position for every row (one sequence tile of the KV
cache per step, whatever the batch holds). What keeps the pads out of the result:

- positions count from each row's first real token: ``pos[b, i] = i − pads[b]`` (pads get
  position 0; Hugging Face computes ``position_ids`` from the attention mask the same way);
- the attention of query ``i`` of row ``b`` sees the keys ``j`` with
  ``min(pads[b], i) ≤ j ≤ i``: every real query sees only real keys, a pad query sees
  only itself (never a row of −inf, which softmax would turn into NaN that the product with
  V spreads);
- pad tokens are a valid id (``PAD_ID``), so the embedding lookup stays in range; their
  values are never read by a real position.

Per-row lengths (each row writing its own cache position) would need the decode step's
writes to land in different sequence tiles row by row; left padding keeps the step's tasks
on one tile.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PAD_ID = 0


@dataclass(frozen=True)
class Prompts:
    """A batch of prompts, left padded: ``ids`` (B, T) int64, ``pads`` (B,) int64."""

    ids: np.ndarray
    pads: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return self.ids.shape[1] - self.pads

    def positions(self, start: int, count: int) -> np.ndarray:
        """Positions of the columns ``start … start + count − 1`` of every row (B, count):
        the column index minus the row's pads, 0 on pads."""
        cols = np.arange(start, start + count, dtype=np.int64)
        return np.maximum(cols[None, :] - self.pads[:, None], 0)

    def row(self, b: int) -> np.ndarray:
        """Row ``b``'s prompt without its pads."""
        return self.ids[b, int(self.pads[b]):]


def left_pad(prompts, *, vocab_size: int, n_positions: int | None = None,
             max_new_tokens: int = 1) -> Prompts:
    """Check the prompts (a sequence of token-id sequences, or a 2-D array whose rows are
    all real tokens) and pad them on the left; every bad value is one clear error naming
    it and the limit."""
    rows = _rows(prompts)
    if not rows:
        raise ValueError("no prompt: give at least one prompt (a sequence of token ids)")
    for b, r in enumerate(rows):
        if r.size == 0:
            raise ValueError(f"prompt {b} is empty: a prompt needs at least one token (e.g. "
                             "the end-of-text token 50256 for text from nothing)")
        bad = (r < 0) | (r >= vocab_size)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"prompt {b}, token {i}: id {int(r[i])} is not a token of this "
                             f"model: ids must be in [0, {vocab_size}) (vocab_size={vocab_size})")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) \
            or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be an integer ≥ 1")
    T = max(r.size for r in rows)
    if n_positions is not None:
        longest = max(range(len(rows)), key=lambda b: rows[b].size)
        if n_positions < T:
            raise ValueError(f"prompt {longest} has {T} tokens, more than the model's "
                             f"n_positions={n_positions}: use at most {n_positions} tokens")
        # the last new token is never fed back: T + N − 1 positions in all
        if T + max_new_tokens - 1 > n_positions:
            raise ValueError(f"max_new_tokens={max_new_tokens} after a prompt of {T} tokens "
                             f"needs {T + max_new_tokens - 1} positions, past the cache of "
                             f"n_positions={n_positions}: at most {n_positions - T + 1} new "
                             "tokens for this prompt")
    ids = np.full((len(rows), T), PAD_ID, np.int64)
    pads = np.empty(len(rows), np.int64)
    for b, r in enumerate(rows):
        pads[b] = T - r.size
        ids[b, pads[b]:] = r
    return Prompts(ids, pads)


def _rows(prompts) -> list[np.ndarray]:
    if isinstance(prompts, np.ndarray):
        if prompts.ndim == 1:
            prompts = prompts[None, :]
        if prompts.ndim != 2:
            raise ValueError(f"prompts must be a batch of token-id sequences, got an array of "
                             f"shape {prompts.shape}")
        seqs = list(prompts)
    elif isinstance(prompts, Sequence) and prompts and all(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in prompts):
        seqs = [prompts]                                  # one prompt as a flat list
    else:
        seqs = list(prompts)
    out = []
    for b, s in enumerate(seqs):
        a = np.asarray(s)
        if a.size and (a.ndim != 1 or not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"prompt {b} must be a flat sequence of integer token ids, got "
                             f"shape {a.shape} and dtype {a.dtype} (text: encode it first, "
                             "generate.text does)")
        out.append(a.astype(np.int64).reshape(-1))
    return out
