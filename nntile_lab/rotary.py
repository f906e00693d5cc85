"""Rotary position embedding's tables (Llama's, Hugging Face's rotate-half convention), in
plain numpy: the angles θ = p·rope_theta^(−2d/D) of positions p and pairs d < D/2, their cos
and sin. The tiled ops that turn q and k by them are ``nntile_lab.ops.rope``; the layers
(``nn.attention``) keep a model's tables."""
from __future__ import annotations

import math

import numpy as np


def check_rope(head_size, theta) -> None:
    """One clear error for a head size rotary positions cannot turn, or a bad base."""
    if isinstance(head_size, bool) or not isinstance(head_size, int) or head_size < 2 \
            or head_size % 2:
        raise ValueError(f"head_size={head_size!r}: rotary positions turn pairs of values, so "
                         "the head size (n_embd / n_head) must be an even integer ≥ 2")
    if isinstance(theta, bool) or not (isinstance(theta, (int, float)) and math.isfinite(theta)
                                       and theta > 0):
        raise ValueError(f"rope_theta={theta!r} must be a finite number > 0 (Llama: 10000 or "
                         "500000)")


def rope_tables(positions, head_size: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """(cos θ, sin θ), float32 arrays of shape (len(positions), head_size/2), for the tokens
    at ``positions`` (non-negative integers): θ[t, d] = positions[t]·theta^(−2d/head_size).

    Computed in float64 and rounded once. Hugging Face's LlamaRotaryEmbedding computes the
    inverse frequencies and the angles in float32 (even in a float64 model), so its angles
    are off by up to |θ|·2⁻²⁴ from these; at short positions both agree to float32's
    precision."""
    check_rope(head_size, theta)
    pos = np.asarray(positions)
    if pos.ndim != 1 or not np.issubdtype(pos.dtype, np.integer) or (pos < 0).any():
        raise ValueError(f"positions must be a 1-D array of integers ≥ 0, got {pos!r}")
    inv_freq = float(theta) ** (-2.0 * np.arange(head_size // 2) / head_size)
    angle = pos.astype(np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
