"""The models' configurations (sizes and tiles) and the registry of model names.

Plain data: the spec (``ExperimentSpec.model`` names a model, ``model_config()`` builds its
config) and the CLI's parser read this module without the compiled extension. A model's
counts (parameters, FLOPs) come from its module tree (``LanguageModel.describe``), built
from the config alone."""
from __future__ import annotations

import functools
import importlib
import json
import math
from dataclasses import asdict, dataclass, fields

from nntile_lab import flops

# The tiling fields, here and in ExperimentSpec (which imports them: the spec builds a
# GPT2Config, never the other way round)
TILE_FIELDS = ("batch_tile", "seq_tile", "embd_tile", "inner_tile", "head_tile", "vocab_tile")


class ModelConfig:
    """What every model's config shares (a dataclass subclass adds its fields): the checks of
    sizes and tiles, ``tile``, dict round trips and the counts read from the model's tree."""

    def _check_shape(self, positive: tuple[str, ...]) -> None:
        """The sizes ``positive`` positive integers, n_head dividing n_embd."""
        for f in positive:
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f}={v!r} must be a positive integer")
        if self.n_embd % self.n_head:
            ok = [h for h in range(1, self.n_embd + 1) if self.n_embd % h == 0]
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                             f"n_head must divide n_embd, e.g. one of {ok[:12]}")

    def _check_tiles(self) -> None:
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
    def from_dict(cls, d: dict):
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {sorted(unknown)}")
        return cls(**d)

    def describe(self):
        """The model's module tree, without tensors (``LanguageModel.describe``)."""
        return describe(self)

    def num_params(self, with_positions: bool = False) -> int:
        """Parameters (a tied head counted once), from the model's tree; without the tables
        only a lookup reads (GPT-2's position table, a Llama's token embedding) unless
        ``with_positions``: PaLM's N."""
        return self.describe().num_params(lookups=with_positions)

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token, summed over the model's layers: 6 per parameter a
        layer multiplies (a tied head's, not a lookup table's) and 12·E·T per attention
        layer — PaLM appendix B's 6·N + 12·L·E·T."""
        return self.describe().flops_per_token(seq_len)


@dataclass
class GPT2Config(ModelConfig):
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
        self._check_shape(("n_layer", "n_head", "n_embd", "n_positions", "vocab_size",
                           "n_inner"))
        if not self.layer_norm_epsilon > 0:
            raise ValueError(f"layer_norm_epsilon={self.layer_norm_epsilon!r} must be > 0")
        self._check_tiles()

    @classmethod
    def from_spec(cls, spec) -> GPT2Config:
        """The config an ``ExperimentSpec`` describes (its shape and tiles)."""
        return cls(n_layer=spec.n_layer, n_head=spec.n_head, n_embd=spec.n_embd,
                   n_positions=spec.positions, vocab_size=spec.vocab_size,
                   n_inner=spec.n_inner, **{name: getattr(spec, name) for name in TILE_FIELDS})


def llama_inner_size(n_embd: int) -> int:
    """SwiGLU's hidden width by Llama's rule: 8/3·n_embd rounded up to a multiple of 256."""
    return max(256, -(-8 * n_embd // 3 // 256) * 256)


@dataclass
class LlamaConfig(ModelConfig):
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
            self.n_inner = llama_inner_size(self.n_embd)
        self._check_shape(("n_layer", "n_head", "n_kv_head", "n_embd", "n_positions",
                           "vocab_size", "n_inner"))
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
        self._check_tiles()
        group = self.n_head // self.n_kv_head
        if self.head_tile is not None and self.head_tile % group:
            raise ValueError(f"head_tile={self.head_tile} is not a multiple of the query group "
                             f"n_head/n_kv_head={group}: a tile of query heads holds whole "
                             f"groups (use a multiple of {group}, or None)")

    @classmethod
    def from_spec(cls, spec) -> LlamaConfig:
        """The config an ``ExperimentSpec`` with ``model="llama"`` describes."""
        defaults = {f.name: f.default for f in fields(cls)}
        return cls(n_layer=spec.n_layer, n_head=spec.n_head, n_kv_head=spec.n_kv_head,
                   n_embd=spec.n_embd, n_inner=spec.n_inner, vocab_size=spec.vocab_size,
                   n_positions=spec.positions,
                   rope_theta=(defaults["rope_theta"] if spec.rope_theta is None
                               else spec.rope_theta),
                   rms_norm_eps=(defaults["rms_norm_eps"] if spec.rms_norm_eps is None
                                 else spec.rms_norm_eps),
                   **{name: getattr(spec, name) for name in TILE_FIELDS})


# ---- the registry: model name → (config class, the model class or "module:Class") ----
MODELS = {"gpt2": (GPT2Config, "nntile_lab.nn.gpt2:GPT2"),
          "llama": (LlamaConfig, "nntile_lab.nn.llama:Llama")}


def register_model(name: str, model_cls) -> None:
    """Make ``model_cls`` (a ``LanguageModel`` whose ``config_class`` is its own: a config
    names its model) known to the spec (``model=name``), the planner and the trainer. A
    class defined in a notebook is known in that process only (a sweep point then runs
    in it: ``isolate=False``); a "module:Class" string, importable anywhere, everywhere."""
    cfg = getattr(model_cls, "config_class", None) if not isinstance(model_cls, str) else None
    if isinstance(model_cls, str):
        module, cls = model_cls.split(":")
        cfg = getattr(importlib.import_module(module), cls).config_class
    if cfg is None:
        raise ValueError(f"{model_cls!r} has no config_class: a LanguageModel names its config")
    for other, (c, _) in MODELS.items():
        if c is cfg and other != name:
            raise ValueError(f"{cfg.__name__} is already the config of model {other!r}: give "
                             f"{name!r} a config class of its own (a dataclass subclass of "
                             f"{cfg.__name__} with no new field will do)")
    MODELS[name] = (cfg, model_cls)


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def config_class(name: str):
    return _entry(name)[0]


def model_class(name: str):
    """The model class registered as ``name`` (its module loads here: a model's module is
    plain data until a step runs, so this needs no compiled extension either)."""
    target = _entry(name)[1]
    if not isinstance(target, str):
        return target
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def model_of_fields(names) -> str | None:
    """The registered model whose config has exactly the fields ``names`` (a checkpoint's
    saved config), or None."""
    names = set(names)
    for name, (cls, _) in MODELS.items():
        if {f.name for f in fields(cls)} == names:
            return name
    return None


def model_name(config) -> str:
    """The registered name of a config's model."""
    for name, (cls, _) in MODELS.items():
        if type(config) is cls:
            return name
    raise ValueError(f"{type(config).__name__} is no registered model's config; models: "
                     f"{', '.join(MODELS)}")


def describe(config):
    """The module tree of ``config``'s model (cached: a config's tree never changes)."""
    return _describe(model_class(model_name(config)),
                     json.dumps(asdict(config), sort_keys=True))


@functools.lru_cache(maxsize=32)
def _describe(cls, config_json: str):
    return cls.describe(cls.config_class.from_dict(json.loads(config_json)))


def _entry(name: str):
    if name not in MODELS:
        raise ValueError(f"model={name!r} is unknown; models: {', '.join(MODELS)}")
    return MODELS[name]
