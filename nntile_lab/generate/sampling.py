"""Choosing the next token from the logits: greedy, or a draw from a filtered softmax.

The distribution a draw comes from, for one row of logits ``z`` (Hugging Face's order of
its logits warpers, so that the same settings mean the same thing in both):

1. temperature: ``z / T``;
2. top-k: only the tokens whose logit is at least the k-th largest (ties at the k-th
   value stay, as in ``TopKLogitsWarper``);
3. top-p (nucleus): the most likely tokens, in decreasing probability, up to and
   including the first at which their cumulative probability reaches ``p`` (at least
   one token; ``TopPLogitsWarper``, whose arithmetic and tie order this follows);
4. softmax over what is left, in float64.

``probabilities`` returns exactly that distribution (the statistical test compares the
draws' frequencies with it); ``Sampler`` draws from it by inverse CDF with one numpy
generator per batch row, seeded from ``(seed, row)``: the same seed and prompt give the same
tokens whatever the batch holds beside it. Greedy decoding takes the first largest logit
(``argmax``, as PyTorch's ``argmax`` in Hugging Face's greedy search).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen. ``greedy``: the most likely token (the other fields
    are then not used). Otherwise a draw at ``temperature`` (> 0) from the ``top_k``
    (≥ 1, None: all) most likely tokens, cut to the nucleus of mass ``top_p`` (in (0, 1],
    None: no cut)."""

    greedy: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if self.greedy:
            return
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                or t <= 0:
            raise ValueError(f"temperature={t!r} must be a finite number > 0 for sampling "
                             "(greedy decoding picks the most likely token: greedy=True)")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer))
                              or k < 1):
            raise ValueError(f"top_k={k!r} must be an integer ≥ 1 (or None: every token)")
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))
                              or not 0 < p <= 1):
            raise ValueError(f"top_p={p!r} must be in (0, 1] (or None: no nucleus cut)")

    def describe(self) -> str:
        if self.greedy:
            return "greedy"
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p:g}")
        return ", ".join(parts)


def filtered_logits(logits: np.ndarray, s: Sampling) -> np.ndarray:
    """The logits after temperature, top-k and top-p (float64; removed tokens −inf),
    row by row over the last axis."""
    z = np.asarray(logits, dtype=np.float64) / s.temperature
    V = z.shape[-1]
    if s.top_k is not None and s.top_k < V:
        kth = np.partition(z, V - s.top_k, axis=-1)[..., V - s.top_k, None]
        z = np.where(z < kth, -np.inf, z)
    if s.top_p is not None and s.top_p < 1:
        # Hugging Face's arithmetic, so that boundary cases fall the same way: least likely
        # first (ties in index order: among equal logits the later index counts as more
        # likely), drop the tokens whose cumulative mass from the bottom is ≤ 1 − p; the
        # most likely token always stays
        order = np.argsort(z, axis=-1, kind="stable")
        cum = np.cumsum(_softmax(np.take_along_axis(z, order, axis=-1)), axis=-1)
        drop_sorted = cum <= 1 - s.top_p
        drop_sorted[..., -1] = False
        drop = np.empty_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        z = np.where(drop, -np.inf, z)
    return z


def probabilities(logits: np.ndarray, s: Sampling) -> np.ndarray:
    """The distribution a draw comes from (float64, rows sum to 1); greedy: one-hot at
    the first largest logit."""
    logits = np.asarray(logits)
    if s.greedy:
        out = np.zeros(logits.shape, np.float64)
        np.put_along_axis(out, np.argmax(logits, axis=-1)[..., None], 1.0, axis=-1)
        return out
    return _softmax(filtered_logits(logits, s))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


class Sampler:
    """Draws the next token of each row: ``sampler(logits)`` with logits (B, V) → (B,)
    int64. Row ``b`` draws from its own generator, seeded from ``(seed, b)`` (``seed``
    None: fresh entropy, not reproducible)."""

    def __init__(self, sampling: Sampling, seed: int | None = None):
        self.sampling = sampling
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                                 or seed < 0):
            raise ValueError(f"seed={seed!r} must be an integer ≥ 0 (or None: not reproducible)")
        self.seed = None if seed is None else int(seed)
        self._entropy = np.random.SeedSequence().entropy if seed is None else int(seed)
        self._rngs: list[np.random.Generator] = []

    def _rng(self, row: int) -> np.random.Generator:
        while len(self._rngs) <= row:
            self._rngs.append(np.random.default_rng([self._entropy, len(self._rngs)]))
        return self._rngs[row]

    def __call__(self, logits: np.ndarray, rows=None) -> np.ndarray:
        """The next token of each row of ``logits`` (B, V); ``rows``: which batch rows
        they are (their generators; default 0..B-1)."""
        logits = np.asarray(logits)
        if logits.ndim != 2:
            raise ValueError(f"logits must be (batch, vocabulary), got shape {logits.shape}")
        if not np.isfinite(logits).all():
            b, v = (int(i) for i in np.argwhere(~np.isfinite(logits))[0])
            raise FloatingPointError(f"logits[{b}, {v}] = {logits[b, v]}: the model produced "
                                     "a non-finite value (diverged weights?)")
        if self.sampling.greedy:
            return np.argmax(logits, axis=-1).astype(np.int64)
        rows = range(logits.shape[0]) if rows is None else rows
        p = probabilities(logits, self.sampling)
        cdf = np.cumsum(p, axis=-1)
        out = np.empty(logits.shape[0], np.int64)
        for i, row in enumerate(rows):
            u = self._rng(int(row)).random() * cdf[i, -1]
            # the first token whose cumulative mass exceeds u; never one of mass 0
            j = int(np.searchsorted(cdf[i], u, side="right"))
            j = min(j, logits.shape[1] - 1)
            while p[i, j] == 0:          # u landed on the right edge of a zero run
                j -= 1
            out[i] = j
        return out
