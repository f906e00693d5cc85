"""GPT-2 configuration: the model's sizes and how each dimension is tiled."""
from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass, fields

from nntile_lab import flops

# The tiling fields, here and in ExperimentSpec (which imports them: the spec builds a
# GPT2Config, never the other way round)
TILE_FIELDS = ("batch_tile", "seq_tile", "embd_tile", "inner_tile", "head_tile", "vocab_tile")


@dataclass
class GPT2Config:
    """Sizes of a GPT-2 and its tiling. A tile size of None means the whole dimension;
    tiles need not divide their dimension (the last tile takes the leftover).

    head_tile counts heads: attention tensors are tiled by whole heads, so Q, K, V
    and the attention output use tiles of head_tile·head_size along n_embd.

    The shape's defaults are the main job's, and the one set: ``ExperimentSpec`` takes
    its model defaults (and its default ``seq_len``, the position table's size) from
    here. The tiles default to None, no tiling: a GPT2Config states a tiling exactly,
    while the spec chooses one (``ExperimentSpec(...).gpt2_config()`` gives its capped
    default tiles).
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 256
    n_positions: int = 128
    vocab_size: int = 50257
    n_inner: int | None = None
    layer_norm_epsilon: float = 1e-5
    batch_tile: int | None = None
    seq_tile: int | None = None
    embd_tile: int | None = None
    inner_tile: int | None = None
    head_tile: int | None = None
    vocab_tile: int | None = None

    def __post_init__(self):
        if self.n_inner is None:
            self.n_inner = flops.inner_size(self)
        for f in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size", "n_inner"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f}={v!r} must be a positive integer")
        if self.n_embd % self.n_head:
            ok = [h for h in range(1, self.n_embd + 1) if self.n_embd % h == 0]
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                             f"n_head must divide n_embd, e.g. one of {ok[:12]}")
        if not self.layer_norm_epsilon > 0:
            raise ValueError(f"layer_norm_epsilon={self.layer_norm_epsilon!r} must be > 0")
        limits = {"seq_tile": ("n_positions", self.n_positions),
                  "embd_tile": ("n_embd", self.n_embd),
                  "inner_tile": ("n_inner", self.n_inner),
                  "head_tile": ("n_head", self.n_head),
                  "vocab_tile": ("vocab_size", self.vocab_size)}
        for f in TILE_FIELDS:
            v = getattr(self, f)
            if v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f}={v!r} must be a positive integer or None (whole "
                                 "dimension)")
            if f in limits and v > limits[f][1]:
                raise ValueError(f"{f}={v} exceeds {limits[f][0]}={limits[f][1]}: use a tile "
                                 f"from 1 to {limits[f][1]} (or None for the whole dimension)")

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head

    def tile(self, name: str, dim: int) -> int:
        """The tile size for a dimension of size ``dim`` (None → whole)."""
        t = getattr(self, name)
        return dim if t is None else min(t, dim)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GPT2Config:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown GPT2Config fields {sorted(unknown)}")
        return cls(**d)

    def num_params(self, with_positions: bool = False) -> int:
        """Parameters (the tied head counted once)."""
        return flops.param_count(self, include_wpe=with_positions)

    def flops_per_token(self, seq_len: int) -> float:
        """Training flops per token, 6·N + 12·L·E·T (PaLM appendix B; N without wpe)."""
        return flops.flops_per_token(self, seq_len)


def _check_tiles(cfg, limits: dict) -> None:
    """Each tiling field of ``cfg`` a positive integer (or None) within its dimension."""
    for f in TILE_FIELDS:
        v = getattr(cfg, f)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{f}={v!r} must be a positive integer or None (whole dimension)")
        if f in limits and v > limits[f][1]:
            raise ValueError(f"{f}={v} exceeds {limits[f][0]}={limits[f][1]}: use a tile from "
                             f"1 to {limits[f][1]} (or None for the whole dimension)")


@dataclass
class LlamaConfig:
    """Sizes of a Llama and its tiling (the fields of Hugging Face's LlamaConfig under
    GPT2Config's names: n_kv_head is num_key_value_heads, n_inner intermediate_size). A tile
    of None is the whole dimension; ``head_tile`` counts query heads and must hold whole
    groups of n_head/n_kv_head of them.

    n_inner None: SwiGLU's 8/3·n_embd rounded up to a multiple of 256 (Llama's rule:
    11008 for n_embd 4096)."""

    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int | None = None
    n_embd: int = 256
    n_inner: int | None = None
    vocab_size: int = 50257
    n_positions: int = 128
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    batch_tile: int | None = None
    seq_tile: int | None = None
    embd_tile: int | None = None
    inner_tile: int | None = None
    head_tile: int | None = None
    vocab_tile: int | None = None

    def __post_init__(self):
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.n_inner is None and isinstance(self.n_embd, int):
            self.n_inner = -(-8 * self.n_embd // 3 // 256) * 256 or 256
        for f in ("n_layer", "n_head", "n_kv_head", "n_embd", "n_positions", "vocab_size",
                  "n_inner"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f}={v!r} must be a positive integer")
        if self.n_embd % self.n_head:
            ok = [h for h in range(1, self.n_embd + 1) if self.n_embd % h == 0]
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                             f"n_head must divide n_embd, e.g. one of {ok[:12]}")
        if self.n_head % self.n_kv_head:
            ok = [h for h in range(1, self.n_head + 1) if self.n_head % h == 0]
            raise ValueError(f"n_head={self.n_head} is not a multiple of n_kv_head="
                             f"{self.n_kv_head}: each key/value head serves a whole group of "
                             f"query heads; use an n_kv_head dividing n_head, one of {ok}")
        if self.head_size % 2:
            raise ValueError(f"the head size n_embd/n_head = {self.n_embd}/{self.n_head} = "
                             f"{self.head_size} is odd: rotary positions turn pairs of values; "
                             "choose n_embd and n_head with an even quotient")
        for f in ("rope_theta", "rms_norm_eps"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= 0:
                raise ValueError(f"{f}={v!r} must be a finite number > 0")
        _check_tiles(self, {"seq_tile": ("n_positions", self.n_positions),
                            "embd_tile": ("n_embd", self.n_embd),
                            "inner_tile": ("n_inner", self.n_inner),
                            "head_tile": ("n_head", self.n_head),
                            "vocab_tile": ("vocab_size", self.vocab_size)})
        group = self.n_head // self.n_kv_head
        if self.head_tile is not None and self.head_tile % group:
            raise ValueError(f"head_tile={self.head_tile} is not a multiple of the query group "
                             f"n_head/n_kv_head={group}: a tile of query heads holds whole "
                             f"groups (use a multiple of {group}, or None)")

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head

    def tile(self, name: str, dim: int) -> int:
        """The tile size for a dimension of size ``dim`` (None → whole)."""
        t = getattr(self, name)
        return dim if t is None else min(t, dim)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> LlamaConfig:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown LlamaConfig fields {sorted(unknown)}")
        return cls(**d)

    def _tree(self):
        """The model's tree (plain data, no extension); imported by name: the model module
        imports this one"""
        return importlib.import_module("nntile_lab.nn.llama").Llama.describe(self)

    def num_params(self, with_positions: bool = False) -> int:
        """Parameters (rotary positions have none)."""
        return self._tree().num_params()

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token: the layers' sum (6 per parameter a token multiplies by
        — the embedding lookup excluded — and attention's 12·L·E·T, PaLM appendix B)."""
        return self._tree().flops_per_token(seq_len)
