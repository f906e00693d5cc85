"""One description of an experiment: model, data shape, tiles, runtime, training, benchmark.

``ExperimentSpec`` holds the ONE set of defaults (they describe the main job, ``nntile-lab
train`` with no options); the CLI commands, the trainer, the optimizers, the benchmarks, the
sweeps and the widgets all build from it. The model's shape defaults are ``GPT2Config``'s,
the layer below, which the spec reads rather than copies. Its field names are the CLI
options (``vocab_tile`` ↔ ``--vocab-tile``) and, for the model, ``GPT2Config``'s fields.

Derived values (None in the spec, resolved where used, so ``replace`` keeps them derived):
``n_inner`` → 4·n_embd (``flops.inner_size``), ``n_positions`` → seq_len, ``warmup`` →
steps // 10, ``weight_decay`` → 0.1 for adam/adamw and 0 for sgd.

Default tiles (batch 512 tokens' worth, inner 512, head 2, vocab 8192) are capped at their
dimension, and
stay "default" through ``replace``: ``spec.replace(vocab_size=100).vocab_tile == 100``.
A tile given explicitly is checked: larger than its dimension, or < 1, is an error naming
the field and the valid range. None means the whole dimension.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field, fields

from nntile_lab import flops
from nntile_lab.errors import UsageError
from nntile_lab.nn.config import (
    TILE_FIELDS,
    GPT2Config,
    config_class,
    llama_inner_size,
    model_names,
)

OPTIMIZERS = ("adamw", "adam", "sgd")
# What the training step computes and stores in (docs/precision.md): fp32 everything;
# bf16 GEMM inputs (fp32 sums) with activations saved in bf16, master weights and optimizer
# state fp32; bf16-storage the saved activations only (compute fp32: CPUs whose bf16 GEMM
# is not faster than sgemm); auto one of those, chosen from the measured GEMM peaks
PRECISIONS = ("fp32", "bf16", "bf16-storage", "auto")
# The optimizers' hyper-parameters that are not options (torch's names and meanings): the
# optimizer classes' defaults, so every optimizer, built from a spec or not, uses these
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
SGD_MOMENTUM = 0.9
# the model's defaults are GPT2Config's (the lower layer: one set, read from there)
_MODEL = {f.name: f.default for f in fields(GPT2Config)}
# Tiles for fields left out, capped at each dimension: enough tasks in the big products
# (vocabulary head, MLP) to keep 2-4 workers busy, where whole-dimension tiles leave
# workers idle. The batch tile (None here) holds TOKENS_PER_TILE tokens: TOKENS_PER_TILE //
# seq_len sequences, at least one. A step with one token tile runs every product that
# accumulates over k (MLP and attention output, the head's dx over the vocabulary) as one
# serial chain on one worker; two token tiles give two chains. The timings behind both
# choices: BENCHMARKS.md, "Measurements formerly in code comments".
TOKENS_PER_TILE = 512
TILE_DEFAULTS = {"batch_tile": None, "seq_tile": None, "embd_tile": None, "inner_tile": 512,
                 "head_tile": 2, "vocab_tile": 8192}
TILE_DEFAULT_HELP = {"batch_tile": f"{TOKENS_PER_TILE} tokens: {TOKENS_PER_TILE} // seq_len "
                                   "sequences, at least 1"}
GROUPS = ("model", "data", "tiles", "runtime", "train", "run", "bench")
# Memory hints the model and optimizer give StarPU (docs/out-of-core.md):
#   invalidate   dead contents dropped, never written back: gradients once their
#                optimizer update has read them (temporaries need nothing: their free
#                drops them unwritten)
#   wont_use     tiles not needed soon written to disk in idle time, so that evicting
#                them later costs no write: a block's saved activations after its
#                forward, its parameters and gradients after its backward, optimizer state
#                after its update. Opt-in (not in "auto"): StarPU 1.3 holds each such tile
#                in RAM until its idle write has run, and runs idle writes only while no
#                task waits for memory — under a tight cap RAM fills with held tiles and
#                the workers wait (docs/out-of-core.md, "Why wont_use is opt-in")
#   prefetch     the next stage's tiles brought into RAM when the current stage starts:
#                the next block's parameters (forward), the previous block's parameters
#                (backward; not its saved activations: StarPU 1.3 aborts when a tile with
#                a prefetch and a wont_use in flight is unregistered)
#   drop_grads   gradients created (a W-mode zero fill) just before their block's
#                backward instead of all at the step's start: never held, evicted and
#                read back as zeros through the forward
HINTS = ("invalidate", "wont_use", "prefetch", "drop_grads")


# "auto" (the default): these when StarPU's RAM is capped, none in memory — there the
# hints only cost: an invalidated gradient's buffer is freed and the next step's zero fill
# faults fresh pages in (the cost: BENCHMARKS.md, "Measurements formerly in code comments").
# Both only ever spare the disk (dead gradients are not written, zeros are not evicted);
# wont_use trades writes for reads and can stall (above): asked for by name.
OOC_HINTS = ("invalidate", "drop_grads")


def parse_hints(text: str | None, out_of_core: bool = True) -> frozenset:
    """The hint set of a comma list ("" or "none": none; "all": every hint; "auto":
    ``OOC_HINTS`` when ``out_of_core`` (a RAM cap is set), else none)."""
    text = (text or "").strip().lower()
    if text == "auto":
        return frozenset(OOC_HINTS) if out_of_core else frozenset()
    if text in ("", "none"):
        return frozenset()
    if text == "all":
        return frozenset(HINTS)
    names = {h.strip() for h in text.split(",") if h.strip()}
    words = sorted(names & {"auto", "none", "all"})
    if words:   # a set's name is no hint: it stands alone
        raise ValueError(f"hints: {words[0]!r} stands alone, not in a list with other hints; "
                         f"give {words[0]!r} or a comma list of {', '.join(HINTS)}")
    unknown = sorted(names - set(HINTS))
    if unknown:
        raise ValueError(f"hints: unknown hint(s) {unknown}; valid ones: {', '.join(HINTS)} "
                         "(a comma list, 'all', 'auto' or 'none')")
    return frozenset(names)


class _Default:
    """Marks a tile left at its (capped) default; never stored after construction."""

    def __repr__(self) -> str:
        return "default"


_DEFAULT = _Default()


def _f(default, group: str, help: str, kind=None, choices=None):
    return field(default=default, metadata={"group": group, "help": help, "type": kind,
                                            "choices": choices})


def _tile(name: str, dim: str):
    d = TILE_DEFAULT_HELP.get(name, TILE_DEFAULTS[name])
    return _f(_DEFAULT, "tiles", f"tile along {dim} (default {d if d else 'whole'}"
              + (f", capped at {dim}" if d else "") + ")", int)


# Upper bounds of the integer fields (exclusive): C's 32-bit int, and for the layer count
# a depth no model here needs (the planner and builders walk the layers one by one).
INT_LIMIT = collections.defaultdict(lambda: 2**31, {"n_layer": 10_000})


@dataclass(frozen=True)
class ExperimentSpec:
    """A run: model + data shape + tiles + runtime + training + benchmark settings."""

    # model
    model: str = _f("gpt2", "model", "which model (its sizes are the options below): "
                    + ", ".join(model_names()), str, model_names())
    n_layer: int = _f(_MODEL["n_layer"], "model", "transformer blocks", int)
    n_head: int = _f(_MODEL["n_head"], "model", "attention heads (must divide n_embd)", int)
    n_embd: int = _f(_MODEL["n_embd"], "model", "embedding width", int)
    vocab_size: int = _f(_MODEL["vocab_size"], "model", "vocabulary size", int)
    n_inner: int | None = _f(None, "model", "MLP width (default 4·n_embd; llama: 8/3·n_embd "
                             "rounded up to a multiple of 256)", int)
    n_positions: int | None = _f(None, "model", "position table size (default seq_len)", int)
    n_kv_head: int | None = _f(None, "model", "llama: key/value heads, each shared by "
                               "n_head/n_kv_head query heads (default n_head)", int)
    rope_theta: float | None = _f(None, "model", "llama: rotary positions' base (default "
                                  "10000)", float)
    rms_norm_eps: float | None = _f(None, "model", "llama: RMS norm epsilon (default 1e-6)",
                                    float)
    precision: str = _f("fp32", "model", "what the step computes and stores in: fp32, bf16 "
                        "(bf16 GEMMs, fp32 sums and master weights), bf16-storage (bf16 saved "
                        "activations, fp32 compute), auto (by the measured bf16/fp32 GEMM "
                        "peaks; docs/precision.md)", str, PRECISIONS)
    # data
    seq_len: int = _f(_MODEL["n_positions"], "data", "tokens per sequence", int)
    batch: int = _f(8, "data", "sequences per micro-batch", int)
    # tiles
    batch_tile: int | None = _tile("batch_tile", "batch")
    seq_tile: int | None = _tile("seq_tile", "seq_len")
    embd_tile: int | None = _tile("embd_tile", "n_embd")
    inner_tile: int | None = _tile("inner_tile", "n_inner")
    head_tile: int | None = _tile("head_tile", "n_head")
    vocab_tile: int | None = _tile("vocab_tile", "vocab_size")
    # runtime
    scheduler: str = _f("lws", "runtime", "StarPU scheduling policy", str)
    ncpu: int | None = _f(None, "runtime", "StarPU CPU workers (default: all cores, at most "
                          "STARPU_MAXCPUS)", int)
    memory_limit_mb: int | None = _f(None, "runtime", "cap on StarPU's RAM for tiles (MiB)",
                                     int)
    ooc_dir: str | None = _f(None, "runtime", "out-of-core disk node directory "
                             "(needs memory_limit_mb)", str)
    ooc_size_mb: int = _f(65536, "runtime", "disk node size (MiB)", int)
    priorities: bool | None = _f(None, "runtime", "task priorities from the task graph "
                                 "(critical path first; prio, lws, dmdas, dmdasd and heteroprio "
                                 "honour them) (default: on)", bool)
    nopencl: int = _f(0, "runtime", "OpenCL workers, one per device (a GPU's, or PoCL's on "
                      "the CPU; docs/accelerators.md)", int)
    opencl_memory_limit_mb: int | None = _f(None, "runtime", "cap on each OpenCL device's "
                                            "memory for tiles (MiB; needs nopencl)", int)
    ncuda: int = _f(0, "runtime", "CUDA workers, one per GPU (needs a StarPU built with CUDA: "
                    "scripts/build_starpu_cuda.sh; docs/accelerators.md)", int)
    cuda_memory_limit_mb: int | None = _f(None, "runtime", "cap on each GPU's memory for tiles "
                                          "(MiB; needs ncuda): RAM is the overflow", int)
    hints: str | None = _f("auto", "runtime",
                           "memory hints, a comma set of " + ", ".join(HINTS)
                           + " ('all', 'none'); they matter out of core", str)
    # train
    steps: int = _f(300, "train", "total optimizer steps", int)
    optimizer: str = _f("adamw", "train", "optimizer", str, OPTIMIZERS)
    lr: float = _f(1e-3, "train", "peak learning rate", float)
    warmup: int | None = _f(None, "train", "linear warm-up steps (default steps/10)", int)
    min_lr: float = _f(1e-4, "train", "cosine decay floor", float)
    weight_decay: float | None = _f(None, "train", "default 0.1 for adam/adamw, 0 for sgd",
                                    float)
    grad_accum: int = _f(1, "train", "micro-batches per optimizer step", int)
    clip: float = _f(1.0, "train", "global gradient-norm clip, 0 for none", float)
    seed: int = _f(0, "train", "weights and batch sampling", int)
    # run: the training loop's evaluations and checkpoints (nntile-lab train)
    eval_every: int = _f(50, "run", "validation loss every N steps and at the end, 0 for none",
                         int)
    eval_batches: int = _f(10, "run", "validation batches per evaluation", int)
    checkpoint_every: int = _f(100, "run", "checkpoint every N steps, 0 for only at the end",
                               int)
    # bench
    warmup_steps: int = _f(1, "bench", "untimed steps before measuring (sweeps, benchmarks)",
                           int)
    measure_steps: int = _f(3, "bench", "timed steps (median and spread)", int)

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and "None" not in str(f.type):
                raise ValueError(f"{f.name}=None (--{_opt(f.name)}) must be "
                                 f"{f.metadata['type'].__name__}; None is not allowed")
            _check_type(f.name, v, f.metadata["type"])
        positive = ["n_layer", "n_head", "n_embd", "vocab_size", "n_inner", "n_positions",
                    "seq_len", "batch", "ncpu", "ooc_size_mb", "steps", "grad_accum",
                    "eval_batches", "measure_steps"]
        for name in positive:
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name}={v!r} (--{_opt(name)}) must be ≥ 1")
        for f in fields(self):   # sizes reach C as 32-bit ints; larger is a typo, not a model
            v = getattr(self, f.name)
            if f.metadata["type"] is int and isinstance(v, int) and v >= INT_LIMIT[f.name]:
                raise ValueError(f"{f.name}={v!r} (--{_opt(f.name)}) must be below "
                                 f"{INT_LIMIT[f.name]:,}")
        for name in ("warmup", "warmup_steps", "eval_every", "checkpoint_every", "seed",
                     "nopencl", "ncuda"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name}={v!r} (--{_opt(name)}) must be ≥ 0")
        for name in ("lr", "min_lr", "weight_decay", "clip"):
            v = getattr(self, name)
            if v is not None and not 0 <= v < math.inf:
                raise ValueError(f"{name}={v!r} (--{_opt(name)}) must be a finite number ≥ 0")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr!r} (--lr) must be > 0: a rate of 0 trains nothing")
        # StarPU refuses a smaller RAM limit or disk node (Runtime): say so here, where the
        # planner and every command see it, not only once a runtime starts
        for name in ("memory_limit_mb", "ooc_size_mb", "opencl_memory_limit_mb",
                     "cuda_memory_limit_mb"):
            v = getattr(self, name)
            if v is not None and v < 16:
                raise ValueError(f"{name}={v!r} (--{_opt(name)}) must be ≥ 16 (MiB): StarPU "
                                 "takes no smaller memory limit or disk node")
        if self.warmup is not None and self.warmup > self.steps:
            raise ValueError(f"warmup={self.warmup} (--warmup) must be ≤ steps={self.steps} "
                             "(--steps): the warm-up is part of the run's steps")
        try:
            parse_hints(self.hints)
        except ValueError as exc:   # in the spec's words: the field and its option
            raise ValueError(f"hints={self.hints!r} (--hints): {exc}") from None
        if self.nopencl and self.ooc_dir is not None:
            # the runtime's reason (nntile_lab.runtime.OPENCL_WITH_DISK), in the spec's words
            raise ValueError(f"ooc_dir={self.ooc_dir!r} (--ooc-dir) with nopencl="
                             f"{self.nopencl} (--nopencl): a disk node under an OpenCL "
                             "device's memory livelocks StarPU 1.3.10; give RAM room for the "
                             "whole step (--memory-limit-mb above `nntile-lab plan`'s peak) "
                             "so that RAM is the device's overflow, or train out of core "
                             "without --nopencl")
        if self.nopencl and self.scheduler == "modular-gemm":
            # the runtime's reason (nntile_lab.runtime.CPU_AND_CUDA_ONLY), in the spec's words
            raise ValueError(f"scheduler='modular-gemm' (--scheduler) with nopencl="
                             f"{self.nopencl} (--nopencl): modular-gemm schedules onto CPU "
                             "and CUDA workers only, so a task placed on the OpenCL device "
                             "waits forever; use dmda, dmdas, heteroprio, eager or lws")
        if self.opencl_memory_limit_mb is not None and not self.nopencl:
            raise ValueError(f"opencl_memory_limit_mb={self.opencl_memory_limit_mb} "
                             "(--opencl-memory-limit-mb) needs OpenCL workers: --nopencl N")
        if self.cuda_memory_limit_mb is not None and not self.ncuda:
            raise ValueError(f"cuda_memory_limit_mb={self.cuda_memory_limit_mb} "
                             "(--cuda-memory-limit-mb) needs CUDA workers: --ncuda N")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} (--precision) is unknown; valid "
                             f"ones: {', '.join(PRECISIONS)}")
        if self.model not in model_names():
            raise ValueError(f"model={self.model!r} (--model) is unknown; models: "
                             f"{', '.join(model_names())}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r} is unknown; valid ones: "
                             f"{', '.join(OPTIMIZERS)}")
        if self.n_embd % self.n_head:
            ok = _divisors(self.n_embd)   # √n steps: a huge typo must not take minutes
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                             f"n_head (--n-head) must divide n_embd, e.g. one of {ok[:12]}")
        llama_only = [f for f in ("n_kv_head", "rope_theta", "rms_norm_eps")
                      if getattr(self, f) is not None]
        if llama_only and self.model != "llama":
            raise ValueError(f"{llama_only[0]}={getattr(self, llama_only[0])!r} "
                             f"(--{_opt(llama_only[0])}) is a Llama option, and the model is "
                             f"{self.model!r}: add --model llama, or leave it out")
        if self.seq_len > self.positions:
            raise ValueError(f"seq_len={self.seq_len} exceeds n_positions={self.positions}: "
                             f"use --seq-len ≤ {self.positions} or a larger --n-positions")
        dims = self.dims()
        auto = set()
        for name in TILE_FIELDS:
            v = getattr(self, name)
            dim_name, dim = dims[name]
            if v is _DEFAULT:
                auto.add(name)
                d = (max(1, TOKENS_PER_TILE // self.seq_len) if name == "batch_tile"
                     else TILE_DEFAULTS[name])
                if d is not None and name == "head_tile":   # whole query groups (llama)
                    group = self.n_head // (self.n_kv_head or self.n_head)
                    d = -(-d // group) * group
                object.__setattr__(self, name, None if d is None else min(d, dim))
            elif v is not None and not 1 <= v <= dim:
                raise ValueError(f"{name}={v} (--{_opt(name)}) must be from 1 to {dim_name}="
                                 f"{dim}, or None for the whole dimension")
        object.__setattr__(self, "_auto", frozenset(auto))
        if self.model == "llama":   # its own rules (groups, even heads, rotary base): said here
            try:
                self.model_config()
            except ValueError as exc:
                raise ValueError(f"{exc} (--model llama)") from None

    # ---- derived values --------------------------------------------------------------
    @property
    def positions(self) -> int:
        """n_positions, or seq_len when not given."""
        return self.seq_len if self.n_positions is None else self.n_positions

    @property
    def inner(self) -> int:
        """The MLP width: n_inner, or 4·n_embd (a Llama: its SwiGLU rule)."""
        if self.model == "llama" and self.n_inner is None:
            return llama_inner_size(self.n_embd)
        return flops.inner_size(self)

    def dims(self) -> dict[str, tuple[str, int]]:
        """Each tile field's dimension: ``{tile: (dimension name, size)}``."""
        return {"batch_tile": ("batch", self.batch), "seq_tile": ("seq_len", self.seq_len),
                "embd_tile": ("n_embd", self.n_embd), "inner_tile": ("n_inner", self.inner),
                "head_tile": ("n_head", self.n_head),
                "vocab_tile": ("vocab_size", self.vocab_size)}

    @property
    def warmup_resolved(self) -> int:
        return self.steps // 10 if self.warmup is None else self.warmup

    @property
    def weight_decay_resolved(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return default_weight_decay(self.optimizer)

    # ---- builders ------------------------------------------------------------------
    def model_config(self):
        """The config of the model the spec names (``model``), with its shape and tiles."""
        return config_class(self.model).from_spec(self)

    def gpt2_config(self) -> GPT2Config:
        """The model's ``GPT2Config`` (shape and tiles); for a spec naming GPT-2."""
        if self.model != "gpt2":
            raise ValueError(f"gpt2_config() of a spec whose model is {self.model!r}: use "
                             "model_config()")
        return GPT2Config.from_spec(self)

    def runtime_kwargs(self) -> dict:
        """Keyword arguments of ``nntile_lab.Runtime``."""
        kw = {"scheduler": self.scheduler, "ncpu": self.ncpu,
              "memory_limit_mb": self.memory_limit_mb, "ooc_dir": self.ooc_dir,
              "ooc_size_mb": self.ooc_size_mb, "hints": self.hints}
        if self.priorities is not None:
            kw["priorities"] = self.priorities
        if self.nopencl:
            kw.update(nopencl=self.nopencl, opencl_memory_limit_mb=self.opencl_memory_limit_mb)
        if self.ncuda:
            kw.update(ncuda=self.ncuda, cuda_memory_limit_mb=self.cuda_memory_limit_mb)
        return kw

    def schedule(self):
        """The learning-rate schedule: warm-up then cosine to min_lr."""
        # upward (train sits above the spec): listed in the layers contract
        from nntile_lab.train.schedule import WarmupCosine
        return WarmupCosine(self.lr, self.warmup_resolved, self.steps, min(self.min_lr, self.lr))

    # ---- counts --------------------------------------------------------------------
    def num_params(self) -> int:
        """Parameters without the position table (6·N counts these), from the model."""
        return self.model_config().num_params()

    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len * self.grad_accum

    def flops_per_step(self) -> float:
        """Model FLOPs of one optimizer step: (6·N + 12·L·E·T) per token."""
        return self.model_config().flops_per_token(self.seq_len) * self.tokens_per_step()

    # ---- (de)serialisation ---------------------------------------------------------
    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> ExperimentSpec:
        """A spec from ``to_dict()`` output (missing keys take the defaults)."""
        names = field_names()
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise ValueError(f"unknown ExperimentSpec field(s) {unknown}; valid ones: "
                             f"{', '.join(names)}")
        return cls(**d)

    def replace(self, **changes) -> ExperimentSpec:
        """A copy with ``changes``; tiles left at their default stay default (re-capped)."""
        d = {k: v for k, v in self.to_dict().items() if k not in self._auto}
        return type(self).from_dict(d | changes)

    def key(self) -> str:
        """Stable short hash of ``to_dict()`` (16 hex digits)."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_weight_decay(optimizer: str) -> float:
    """The weight decay an optimizer gets when none is given: 0.1 for adam/adamw, 0 for
    sgd (``weight_decay=None``; the optimizer classes' defaults too)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r} is unknown; valid ones: "
                         f"{', '.join(OPTIMIZERS)}")
    return 0.0 if optimizer == "sgd" else 0.1


def field_names() -> list[str]:
    return [f.name for f in fields(ExperimentSpec)]


def spec_fields(group: str | None = None) -> list[dataclasses.Field]:
    """The spec's fields (in one group, or all), in declaration order."""
    return [f for f in fields(ExperimentSpec) if group is None or f.metadata["group"] == group]


_METAVARS = {int: "N", float: "X", str: "NAME"}


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _opt(name: str) -> str:
    return name.replace("_", "-")


def _check_type(name: str, v, kind) -> None:
    if v is None or v is _DEFAULT:
        return
    if kind is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    else:
        ok = isinstance(v, kind)
    if not ok:
        raise ValueError(f"{name}={v!r} (--{_opt(name)}) must be {kind.__name__}, got "
                         f"{type(v).__name__}")


def parse_value(name: str, text: str):
    """A field's value from command-line text (``none`` → None)."""
    f = {f.name: f for f in fields(ExperimentSpec)}.get(name)
    if f is None:
        raise ValueError(f"unknown ExperimentSpec field {name!r}; valid ones: "
                         f"{', '.join(field_names())}")
    text = text.strip()
    if text.lower() in ("none", "whole"):
        return None
    kind = f.metadata["type"]
    if kind is bool:   # (bool("maybe") is True: never let Python decide)
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--{_opt(name)} {text!r}: not a yes/no value; give true or false "
                         "(or 1/0, yes/no, on/off)")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"--{_opt(name)} {text!r}: not a valid {kind.__name__}") from None


# ---- argparse ------------------------------------------------------------------------
def add_arguments(parser, groups=GROUPS, titles: dict | None = None, skip=()) -> None:
    """One ``--option`` per spec field in ``groups`` (default None = "not given", so the
    caller can layer checkpoint values and the spec defaults underneath)."""
    titles = titles or {}
    for group in groups:
        g = parser.add_argument_group(titles.get(group, group))
        for f in spec_fields(group):
            if f.name in skip:
                continue
            default = f.default if f.default is not _DEFAULT else TILE_DEFAULTS[f.name]
            helptext = f.metadata["help"]
            if "default" not in helptext:
                helptext += f" (default {default})"
            if f.metadata["type"] is bool:   # --name / --no-name; None: the default
                g.add_argument(f"--{_opt(f.name)}", action=argparse.BooleanOptionalAction,
                               default=None, help=helptext)
                continue
            g.add_argument(f"--{_opt(f.name)}", type=f.metadata["type"], default=None,
                           choices=f.metadata["choices"], help=helptext.replace("%", "%%"),
                           metavar=None if f.metadata["choices"] else
                           _METAVARS[f.metadata["type"]])


def given(args, groups=GROUPS) -> dict:
    """The spec fields set on the command line (not None) in parsed ``args``."""
    return {f.name: getattr(args, f.name) for g in groups for f in spec_fields(g)
            if getattr(args, f.name, None) is not None}


def from_args(args, groups=GROUPS, base: dict | None = None) -> ExperimentSpec:
    """A spec from parsed options over ``base`` values (e.g. a checkpoint's) and defaults.
    A value the spec refuses is a usage error (``nntile-lab`` exits 2)."""
    try:
        return ExperimentSpec.from_dict((base or {}) | given(args, groups))
    except UsageError:
        raise
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc


# The one set of defaults as an object: Runtime, train(), the optimizers, the memory planner
# and the figures' plan take their defaults from here (none keeps a copy of its own).
DEFAULTS = ExperimentSpec()
