"""The paper's custom GPT-2 family, at this machine's scale, and the same family of any
model built from layers.

NNTile's paper (arXiv 2504.13236) trains GPT-2 models with ``L`` layers and embedding size
``E``: parameters ``N = 12·L·E² + V·E`` (V = 50 257), MLP width ``n_inner = 4·E``, and widens
``E`` until the model no longer fits the memory of the GPUs.  Here the same family is swept
with ``E`` chosen so that the sizes go from well inside to well beyond one memory cap that
both systems run under; a plan is the whole description of one figure run.

``FigurePlan.model`` names the model (a name of ``nn.config``'s registry: ``"gpt2"``,
``"llama"``, or one a user registered with ``register_model``): the same ``L``, ``E``, heads
of 64 and cap, that model's own MLP rule and parameter count. PyTorch's series run the
model's PyTorch counterpart (``bench.torch_baseline.PEERS``); a model without one has
nntile_lab's only.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace

from nntile_lab.bench.torch_baseline import PEERS
from nntile_lab.bench.torch_baseline import cpu_has_bf16 as has_bf16
from nntile_lab.nn.config import model_names
from nntile_lab.spec import (
    DEFAULTS,  # steps, scheduler, workers: the spec's defaults
    ExperimentSpec,
)

PAPER_VOCAB = 50257
HEAD_SIZE = 64            # GPT-2's head size; n_head = E / 64
ADAM_BYTES_PER_PARAM = 16  # fp32 weights, gradients and Adam's two moments
# how the figures name each family and PyTorch's counterpart (bench.torch_baseline.PEERS:
# the models PyTorch's series can run)
TWIN_NAMES = {"gpt2": "nanoGPT", "llama": "the fast PyTorch Llama"}
FAMILY_NAMES = {"gpt2": "GPT-2", "llama": "Llama"}


def family_params(n_layer: int, n_embd: int, vocab_size: int = PAPER_VOCAB) -> int:
    """The paper's parameter count ``12·L·E² + V·E`` (biases, norms, positions left out)."""
    return 12 * n_layer * n_embd**2 + vocab_size * n_embd


@dataclass(frozen=True)
class FigurePlan:
    """One figure run: the model, the family's sizes, the batch, the cap, the steps, the
    series."""

    # the family's model: a name of nn.config's registry. ``imports``: modules each point's
    # process imports first (one that registers a user's model with ``register_model``)
    model: str = DEFAULTS.model
    imports: tuple[str, ...] = ()
    layers: tuple[int, ...] = (4, 8)
    embds: tuple[int, ...] = (256, 512, 768, 1024, 1280, 1536)
    vocab_size: int = PAPER_VOCAB
    batch: int = 4
    seq_len: int = 256
    cap_mb: int = 2048            # RAM each run may use above its start (both systems)
    warmup_steps: int = DEFAULTS.warmup_steps
    measure_steps: int = DEFAULTS.measure_steps
    scheduler: str = DEFAULTS.scheduler
    ncpu: int | None = DEFAULTS.ncpu  # None: every core (StarPU workers and torch threads)
    # the bf16 series (nntile_lab bf16 and PyTorch bf16 autocast); None: where the CPU has
    # bf16 instructions (avx512_bf16 / amx_bf16: elsewhere PyTorch's would be emulated)
    bf16: bool | None = None
    ooc: bool = True              # nntile_lab beyond the cap out of core (disk node), not 0
    # the paper's setting: nntile_lab on an OpenCL device whose memory is capped at cap_mb
    # ("the GPU"), RAM as its overflow (docs/accelerators.md)
    device: bool = False
    point_timeout_s: int = 900
    # PyTorch's points: the faster of eager and torch.compile that fits under the cap (each
    # run in its own process); False: eager only
    torch_compile: bool = True
    # the series measured (SYSTEMS' keys); the bf16 ones only where ``bf16`` resolves True,
    # the device one only where ``device`` is set
    systems: tuple[str, ...] = field(default=("nntile_lab", "torch_fp32", "nntile_lab_bf16",
                                              "torch_bf16", "nntile_lab_device"))

    def __post_init__(self):
        for name in ("batch", "seq_len", "cap_mb", "measure_steps", "point_timeout_s"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r} must be a positive integer")
        for e in self.embds:
            if e < HEAD_SIZE or e % HEAD_SIZE:
                raise ValueError(f"n_embd={e} must be a multiple of the head size {HEAD_SIZE}")
        unknown = set(self.systems) - set(SYSTEMS)
        if unknown:
            raise ValueError(f"unknown systems {sorted(unknown)}; choose from {list(SYSTEMS)}")
        if self.model not in model_names():
            raise ValueError(f"model={self.model!r} is unknown; choose from "
                             f"{', '.join(model_names())} (or register yours: "
                             "nn.config.register_model)")
        torch = [s for s in self.systems if not is_nntile(s)]
        if torch and self.model not in PEERS:
            raise ValueError(f"model={self.model!r} has no PyTorch counterpart (PyTorch's "
                             f"series run {', '.join(PEERS)}): give systems without "
                             f"{', '.join(torch)}, e.g. systems=('nntile_lab', "
                             "'nntile_lab_bf16')")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> FigurePlan:
        d = dict(d)
        for k in ("layers", "embds", "systems", "imports"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)

    def with_bf16_resolved(self) -> FigurePlan:
        """``bf16=None`` becomes True exactly where the CPU has native bf16 (avx512_bf16)."""
        if self.bf16 is not None:
            return self
        return replace(self, bf16=cpu_has_bf16())


# A series is a system in a precision: nntile_lab's ``precision`` (spec field) or PyTorch's
# (fp32, or bf16 autocast: ``reference.autocast``). The fp32 ids predate the bf16 series
# (records named by them keep working); the order is the figures' and tables' order.
SYSTEMS = {"nntile_lab": "nntile_lab fp32", "torch_fp32": "PyTorch fp32",
           "nntile_lab_bf16": "nntile_lab bf16", "torch_bf16": "PyTorch bf16 autocast",
           "nntile_lab_device": "nntile_lab, device capped → RAM"}
PRECISION = {"nntile_lab": "fp32", "torch_fp32": "fp32", "nntile_lab_bf16": "bf16",
             "torch_bf16": "bf16", "nntile_lab_device": "fp32"}
PRECISIONS = ("fp32", "bf16")


def is_nntile(system: str) -> bool:
    """A series of nntile_lab (the other system is PyTorch)."""
    return system.startswith("nntile_lab")


def systems_for(precisions) -> tuple[str, ...]:
    """The series of both systems in these precisions (``--precision fp32,bf16``); the
    device series is asked for on its own (``--device``)."""
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad or not precisions:
        raise ValueError(f"precision {','.join(precisions)!r}: choose from "
                         f"{', '.join(PRECISIONS)} (a comma list, e.g. fp32,bf16)")
    return tuple(s for s in SYSTEMS if PRECISION[s] in precisions and s != "nntile_lab_device")


# Full size: E from 256 to 1536 spans 2.2 to 4.8 GB of fp32 Adam state at 8 layers against a
# 2 GiB cap.  Smoke: small E under a 512 MiB cap; the same shape of result in minutes.
# Quick (the notebook's default): the smoke sizes from E = 128, fp32, PyTorch eager only
# (each torch.compile costs seconds of compiling per point; the bf16 pair doubles the
# points): PyTorch stops fitting at E = 384 while nntile_lab goes on out of core — the
# paper's result in about 2 minutes on 2 cores (docs/paper-figures.md).
FULL = FigurePlan()
SMOKE = FigurePlan(embds=(64, 128, 256, 384, 512), batch=2, seq_len=64, cap_mb=512,
                   measure_steps=3, point_timeout_s=120)
QUICK = replace(SMOKE, embds=(128, 256, 384, 512), torch_compile=False, bf16=False)


def point_spec(n_layer: int, n_embd: int, plan: FigurePlan, **runtime):
    """The family member as the ExperimentSpec both systems run: heads of 64, tiles of
    about 1–10 ms tasks, the plan's batch, sequence, scheduler, workers and steps
    (``runtime``: memory_limit_mb / ooc_dir of an out-of-core run, or ``precision``: a bf16
    series'). The batch tile is the spec's default (512 tokens): a whole-batch tile ran each
    product's k-sum as one chain on one worker while the other waited."""
    n_head = n_embd // HEAD_SIZE
    spec = ExperimentSpec(model=plan.model, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                          vocab_size=plan.vocab_size, seq_len=plan.seq_len,
                          batch=plan.batch, head_tile=max(1, n_head // 2),
                          vocab_tile=min(plan.vocab_size, 8192), scheduler=plan.scheduler,
                          ncpu=plan.ncpu, warmup_steps=plan.warmup_steps,
                          measure_steps=plan.measure_steps, **runtime)
    # n_inner stated (the family's, recorded with every point) by the model's rule: GPT-2's
    # 4·E, a Llama's 8/3·E rounded up to 256
    return spec.replace(n_inner=spec.inner, inner_tile=min(spec.inner, 1024))


def series_spec(system: str, n_layer: int, n_embd: int, plan: FigurePlan, **runtime):
    """``point_spec`` in the series' precision (fp32 series: the spec's default, so that
    records measured before the bf16 series compare equal)."""
    if PRECISION[system] != "fp32":
        runtime["precision"] = PRECISION[system]
    return point_spec(n_layer, n_embd, plan, **runtime)


def model_config(n_layer: int, n_embd: int, plan: FigurePlan):
    """The family member's tiled config (``point_spec``'s: a GPT2Config for GPT-2, a
    LlamaConfig for the Llama)."""
    return point_spec(n_layer, n_embd, plan).model_config()


def plan_params(n_layer: int, n_embd: int, plan: FigurePlan) -> int:
    """The family member's size as the figures give it: the paper's count for GPT-2
    (``family_params``), every parameter of the model's tree for another model (a Llama:
    its token embedding and untied head included)."""
    if plan.model == "gpt2":
        return family_params(n_layer, n_embd, plan.vocab_size)
    return model_config(n_layer, n_embd, plan).num_params(with_positions=True)


def family_name(model: str) -> str:
    """"GPT-2", "Llama", or a registered model's own name."""
    return FAMILY_NAMES.get(model, model)


def cpu_has_bf16() -> bool:
    """Native bf16 (avx512_bf16 / amx_bf16): the PyTorch baseline's own rule."""
    return has_bf16()


def is_smoke_env() -> bool:
    """``NNTILE_LAB_SMOKE=1`` (CI, tests) asks notebooks for their smoke sizes."""
    return os.environ.get("NNTILE_LAB_SMOKE", "0") not in ("", "0")
