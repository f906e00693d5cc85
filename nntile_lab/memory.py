"""Memory planner: will a run fit, and if not, how much disk does it need?

``estimate(spec)`` counts, from the model's shapes and tiles alone (nothing is
allocated, no task submitted), the bytes StarPU holds at the peak of a training
step, split by category (B batch, T seq_len, E n_embd, F n_inner, H heads,
V vocab, N parameters, fp32 = 4 bytes):

  parameters        4·N
  gradients         4·N
  optimizer_state   4·N·slots (AdamW/Adam: m and v; SGD with momentum: one buffer)
  activations       what the forward keeps for the backward: the model's own records
                    (``nn.activations``: the batch's token ids, labels and positions,
                    every block's ``BlockActivations``, the head's), sized field by
                    field from their declared shapes — L·(8·BTE + 2·BTF + B·H·T² +
                    4·BT) + 2·BTE + 2·BT floats and 3·BT int64 today
  temporaries       the largest set alive at once besides those: the head's logits
                    and their gradient, 1.5·BTV (logits tiles are freed as their
                    gradient tiles appear; the factor is measured), against one
                    block's backward (2·B·H·T² + 3·BTE, or 2·BTF + 2·BTE): the larger

Under a bf16 precision (``spec.precision``; ``precision_categories``) the same categories
hold other bytes per element: the saved activations marked bf16 in ``nn.activations``
take 2 bytes (``bf16``, ``bf16-storage``), and ``bf16`` adds a 2-byte copy of every GEMM
weight to the parameters (wte and each block's q, k, v, c_proj, c_fc, mlp c_proj);
gradients and optimizer state stay float32.

The peak is their sum. The largest single task's working set (the tiles of its
buffers, e.g. the head's gemm: an activation tile, a vocabulary tile of the
embedding and a logits tile) bounds the cap from below: each worker needs its
task's tiles in RAM at once.

Verdicts, for a ``memory_limit_mb`` cap on StarPU's RAM:
  fits              the peak is under the cap (or there is no cap);
  fits_with_disk    the peak is over the cap, an out-of-core directory is given, and
                    its disk node (``ooc_size_mb``) and free space hold the overflow
                    (``disk_bytes`` = 1.1·peak: clean tiles keep their disk copy);
  cannot_run        the cap is below ``ncpu`` tasks' working sets, or the overflow has
                    no disk node, or the disk node or free space is too small, or the
                    directory is not writable.

``check(spec)`` raises ``MemoryPlanError`` for cannot_run, before any task exists.
Besides StarPU's tiles the process holds the interpreter and libraries
(``PROCESS_BASE_BYTES``, measured) and numpy copies at start and at checkpoints;
``rss_bytes`` adds them, for caps on the whole process (``starpu_limit_mb``).
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field

from nntile_lab.nn.activations import Activations
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.state import init_chunk_elems
from nntile_lab.rss import peak_rss_bytes, rss_bytes  # noqa: F401  (memory.peak_rss_bytes)
from nntile_lab.spec import DEFAULTS

F32, I64 = 4, 8
MIB = 1 << 20
# RSS of a process that imported nntile_lab with the trainer (numpy, pandas, cffi, the
# kernels' BLAS) and started StarPU, before any tile, with a margin over the measured
# figure (BENCHMARKS.md, "Measurements formerly in code comments").
PROCESS_BASE_BYTES = 160 * MIB
# StarPU 1.3 (built with OpenCL) opens every OpenCL platform the ICD loader lists at
# starpu_init, even with no OpenCL worker asked for: with PoCL installed each process maps
# PoCL's LLVM (BENCHMARKS.md, "Measurements formerly in code comments")
OPENCL_PLATFORM_BYTES = 64 * MIB


def opencl_platforms_installed() -> bool:
    """Whether the OpenCL ICD loader finds a platform (its vendors directory, or the
    ``OCL_ICD_VENDORS`` it honours, lists an .icd file)."""
    vendors = os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")
    if os.path.isfile(vendors):
        return vendors.endswith(".icd")
    try:
        return any(n.endswith(".icd") for n in os.listdir(vendors))
    except OSError:
        return False


def process_base_bytes() -> int:
    """RSS of a started process before any tile (``PROCESS_BASE_BYTES``, plus the OpenCL
    platform's libraries where StarPU loads them)."""
    return PROCESS_BASE_BYTES + (OPENCL_PLATFORM_BYTES if opencl_platforms_installed() else 0)
OPTIMIZER_SLOTS = {"adamw": 2, "adam": 2, "sgd": 1}
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries")
VERDICTS = ("fits", "fits_with_disk", "cannot_run")


class MemoryPlanError(ValueError):
    """The run cannot run under its memory settings (the message says why and what to do)."""


@dataclass
class MemoryPlan:
    """What ``estimate`` found; bytes unless named otherwise."""

    categories: dict[str, int]
    peak_bytes: int                 # StarPU's tiles at the peak of a step
    largest_task_bytes: int         # one task's buffers
    largest_task: str               # which task that is
    rss_bytes: int                  # the whole process: base + tiles in RAM (or init copies)
    memory_limit_mb: int | None
    verdict: str
    disk_bytes: int = 0             # what the disk node must hold (fits_with_disk)
    reason: str = ""
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def report(self) -> str:
        rows = [f"  {k:<16} {v / MIB:10.1f} MiB" for k, v in self.categories.items()]
        cap = "no cap" if self.memory_limit_mb is None else f"cap {self.memory_limit_mb} MiB"
        precision = self.details.get("precision", "fp32")
        if precision != "fp32":
            cap += f", precision {precision}"
        lines = [f"memory plan ({cap}):", *rows,
                 f"  {'peak (StarPU)':<16} {self.peak_bytes / MIB:10.1f} MiB",
                 f"  {'process RSS':<16} {self.rss_bytes / MIB:10.1f} MiB (estimated)",
                 f"  largest task     {self.largest_task_bytes / MIB:10.2f} MiB "
                 f"({self.largest_task})",
                 f"verdict: {self.verdict}"
                 + (f", disk {self.disk_bytes / MIB:.0f} MiB" if self.disk_bytes else "")]
        if self.reason:
            lines.append(self.reason)
        return "\n".join(lines)


def _resolve(spec, batch, seq_len, optimizer, memory_limit_mb, ooc_dir, ooc_size_mb, ncpu,
             precision=None):
    """(GPT2Config, settings) from an ExperimentSpec, or a GPT2Config plus keywords."""
    if precision is None:
        precision = DEFAULTS.precision if isinstance(spec, GPT2Config) else spec.precision
    _check_precision(precision)
    if isinstance(spec, GPT2Config):
        if batch is None or seq_len is None:
            raise ValueError("estimate(GPT2Config, ...) needs batch= and seq_len=")
        cfg = spec
        opt = optimizer or DEFAULTS.optimizer
    else:
        cfg = spec.gpt2_config()
        batch = spec.batch if batch is None else batch
        seq_len = spec.seq_len if seq_len is None else seq_len
        opt = optimizer or spec.optimizer
        memory_limit_mb = spec.memory_limit_mb if memory_limit_mb is None else memory_limit_mb
        ooc_dir = spec.ooc_dir if ooc_dir is None else ooc_dir
        ooc_size_mb = spec.ooc_size_mb if ooc_size_mb is None else ooc_size_mb
        ncpu = spec.ncpu if ncpu is None else ncpu
    if opt not in OPTIMIZER_SLOTS:
        raise ValueError(f"optimizer={opt!r} is not one of {sorted(OPTIMIZER_SLOTS)}")
    if ncpu is None:
        ncpu = os.cpu_count() or 1
        try:   # StarPU's build caps the workers; a plan made without StarPU assumes no cap
            from nntile_lab.runtime import max_workers
            ncpu = min(ncpu, max_workers())
        except ImportError:
            pass
    return cfg, dict(batch=batch, seq_len=seq_len, optimizer=opt, ncpu=ncpu, precision=precision,
                     memory_limit_mb=memory_limit_mb, ooc_dir=ooc_dir,
                     ooc_size_mb=DEFAULTS.ooc_size_mb if ooc_size_mb is None else ooc_size_mb)


def categories(cfg: GPT2Config, batch: int, seq_len: int, optimizer: str = "adamw",
               precision: str = "fp32") -> dict:
    """Bytes per category at the peak of a training step (see the module docstring)."""
    if precision != "fp32":
        return precision_categories(cfg, batch, seq_len, optimizer, precision)
    B, T, E, F, H, V = batch, seq_len, cfg.n_embd, cfg.n_inner, cfg.n_head, cfg.vocab_size
    n = cfg.num_params(with_positions=True)
    BT, BTE, BTF, BHTT = B * T, B * T * E, B * T * F, B * H * T * T
    temps = max(3 * BT * V // 2, 2 * BHTT + 3 * BTE, 2 * BTF + 2 * BTE)
    return {"parameters": F32 * n, "gradients": F32 * n,
            "optimizer_state": F32 * n * OPTIMIZER_SLOTS[optimizer],
            "activations": Activations.nbytes(cfg, B, T),
            "temporaries": F32 * temps}


def largest_task(cfg: GPT2Config, batch: int, seq_len: int) -> tuple[int, str]:
    """The largest working set of one task (bytes) and which task has it."""
    E, F, V, D = cfg.n_embd, cfg.n_inner, cfg.vocab_size, cfg.head_size
    bt, st = cfg.tile("batch_tile", batch), cfg.tile("seq_tile", seq_len)
    et, it, vt = cfg.tile("embd_tile", E), cfg.tile("inner_tile", F), cfg.tile("vocab_tile", V)
    hh = cfg.tile("head_tile", cfg.n_head)
    ht, rows = hh * D, bt * st
    biggest_param = max(vt * et, et * it, et * ht, st * et)
    tasks = {   # elements of each task's buffers
        "mlp c_fc gemm": rows * et + et * it + rows * it,
        "mlp c_proj gemm": rows * it + it * et + rows * et,
        "attention q/k/v gemm": rows * et + et * ht + rows * ht,
        "attention scores gemm": 2 * bt * hh * st * D + bt * hh * st * st,
        "attention softmax backward": 3 * bt * hh * st * st,
        "head gemm": rows * et + vt * et + rows * vt,
        "cross-entropy backward": 2 * rows * vt + 2 * rows + 4 * rows,
        "optimizer update": 4 * biggest_param,
    }
    name = max(tasks, key=tasks.get)
    return F32 * tasks[name], name


def estimate(spec, batch: int | None = None, seq_len: int | None = None, *,
             optimizer: str | None = None, memory_limit_mb: int | None = None,
             ooc_dir: str | None = None, ooc_size_mb: int | None = None,
             ncpu: int | None = None, precision: str | None = None) -> MemoryPlan:
    """The memory plan of one training run: an ``ExperimentSpec`` (its runtime fields
    give the cap and disk), or a ``GPT2Config`` with ``batch`` and ``seq_len``;
    keywords override the spec's. ``precision`` ``auto`` plans for the mode that needs
    the most bytes (fp32), as the mode is chosen only when the run starts."""
    cfg, s = _resolve(spec, batch, seq_len, optimizer, memory_limit_mb, ooc_dir,
                      ooc_size_mb, ncpu, precision)
    cats = categories(cfg, s["batch"], s["seq_len"], s["optimizer"], s["precision"])
    peak = sum(cats.values())
    task_bytes, task_name = largest_task(cfg, s["batch"], s["seq_len"])
    cap_mb = s["memory_limit_mb"]
    cap = math.inf if cap_mb is None else cap_mb * MIB
    # initialisation draws the parameters in row bands (nn.state.iter_init_chunks) in
    # float64 and casts them to float32 while StarPU holds the parameters; then a step
    # holds the peak
    largest_param = init_chunk_elems(cfg)
    init = min(cats["parameters"], cap) + (I64 + F32) * largest_param
    rss = process_base_bytes() + int(max(init, min(peak, cap)))
    # a checkpoint gathers parameters and optimizer state into numpy (12·N bytes for AdamW)
    ckpt = cats["parameters"] + cats["optimizer_state"]
    details = dict(s, ooc_backend="o_direct", largest_param=largest_param,
                   checkpoint_staging_bytes=ckpt)
    plan = MemoryPlan(cats, peak, task_bytes, task_name, rss, cap_mb, "fits", details=details)
    if cap_mb is not None and cap_mb < 16:   # what Runtime refuses never "fits"
        return _cannot(plan, f"--memory-limit-mb {cap_mb} is below 16 MiB, the smallest "
                       "memory limit StarPU takes: give 16 or more")
    if cap_mb is None or peak <= cap_mb * MIB:
        return plan
    need = s["ncpu"] * task_bytes
    if cap_mb * MIB < need:
        return _cannot(plan, f"the cap of {cap_mb} MiB is below what {s['ncpu']} worker(s) "
                       f"need at once: {s['ncpu']} × {task_bytes / MIB:.1f} MiB for the "
                       f"largest task ({task_name}); raise --memory-limit-mb to at least "
                       f"{math.ceil(need / MIB)}, or use smaller tiles (--vocab-tile, "
                       "--inner-tile, --batch-tile)")
    # a tile read back keeps its disk copy while it stays clean: the disk node may hold
    # every tile at once
    disk = math.ceil(peak * 1.1 / MIB) * MIB
    # and leave the runtime's reserve free: (workers + 1) working sets of the largest task
    # (Runtime refuses less out of core: StarPU would livelock moving tiles;
    # kernels/runtime/guard.c)
    reserve = (s["ncpu"] + 1) * task_bytes
    disk = max(disk, math.ceil((peak + reserve - cap_mb * MIB) / MIB) * MIB)
    plan.disk_bytes = disk
    if s["ooc_dir"] is None:
        return _cannot(plan, f"the step needs {peak / MIB:.0f} MiB but the cap is {cap_mb} MiB "
                       f"and no out-of-core directory is given: pass --ooc-dir DIR (with "
                       f"--ooc-size-mb ≥ {disk // MIB}) or raise --memory-limit-mb to "
                       f"{math.ceil(peak / MIB)}")
    problem = _disk_problem(s["ooc_dir"], disk)
    if problem:
        return _cannot(plan, problem)
    if s["ooc_size_mb"] * MIB < disk:
        return _cannot(plan, f"--ooc-size-mb {s['ooc_size_mb']} is too small: the overflow "
                       f"needs {disk // MIB} MiB on disk; pass --ooc-size-mb {disk // MIB}")
    plan.verdict = "fits_with_disk"
    return plan


def check(spec, **kw) -> MemoryPlan:
    """``estimate(spec, **kw)``; raises ``MemoryPlanError`` if the run cannot run."""
    plan = estimate(spec, **kw)
    if plan.verdict == "cannot_run":
        raise MemoryPlanError(f"cannot run under these memory settings: {plan.reason}")
    return plan


def ooc_overhead_bytes(spec) -> int:
    """What an out-of-core process holds besides StarPU's tiles and its base: transfers
    in flight, StarPU's per-tile and per-request structures, the allocator's slack.
    Bounded by 64 MiB plus the larger of 4 of the largest tiles and 0.2 bytes per
    parameter: an empirical fit, not a model, above what peak RSS − StarPU's peak − base
    measured on the paper family (BENCHMARKS.md, "Measurements formerly in code comments")."""
    cfg = spec.gpt2_config() if not isinstance(spec, GPT2Config) else spec
    E, V = cfg.n_embd, cfg.vocab_size
    et, vt = cfg.tile("embd_tile", E), cfg.tile("vocab_tile", V)
    it = cfg.tile("inner_tile", cfg.n_inner)
    largest = F32 * max(vt * et, et * it, E * it)
    n = cfg.num_params(with_positions=True)
    return 64 * MIB + max(4 * largest, n // 5)


def starpu_limit_mb(process_cap_mb: int, spec, *, ooc: bool = False, **kw) -> int:
    """The ``memory_limit_mb`` for StarPU that keeps the whole process's RSS under
    ``process_cap_mb``: the cap less the process's base and numpy staging (and, ``ooc``
    for a run with a disk node, ``ooc_overhead_bytes``)."""
    plan = estimate(spec, **{**kw, "memory_limit_mb": None})
    init_copies = (I64 + F32) * max(plan.details["largest_param"], 0)
    other = process_base_bytes() + init_copies + (ooc_overhead_bytes(spec) if ooc else 0)
    limit = (process_cap_mb * MIB - other) // MIB
    if limit < 16:
        raise MemoryPlanError(f"a process cap of {process_cap_mb} MiB leaves {limit} MiB for "
                              f"tiles after the process itself ({other / MIB:.0f} MiB): "
                              "StarPU needs at least 16")
    return int(limit)


def _cannot(plan: MemoryPlan, reason: str) -> MemoryPlan:
    plan.verdict, plan.reason = "cannot_run", reason
    return plan


def _disk_problem(ooc_dir: str, need: int) -> str:
    """Why ``ooc_dir`` cannot hold ``need`` bytes of evicted tiles ('' if it can)."""
    try:
        os.makedirs(ooc_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=ooc_dir):
            pass
    except OSError as exc:
        return (f"the out-of-core directory {ooc_dir!r} is not writable ({exc.strerror}): "
                "pass --ooc-dir with a writable directory")
    free = shutil.disk_usage(ooc_dir).free
    if free < need:
        return (f"the out-of-core directory {ooc_dir!r} has {free // MIB} MiB free, the "
                f"overflow needs {need // MIB} MiB: free space or pick another --ooc-dir")
    return ""


# ---- bytes per precision (spec.precision, nn.precision) --------------------------------
BF16 = 2
PRECISION_MODES = ("fp32", "bf16", "bf16-storage")


def _check_precision(precision: str) -> None:
    if precision not in (*PRECISION_MODES, "auto"):
        raise ValueError(f"precision={precision!r} is unknown; valid ones: "
                         f"{', '.join((*PRECISION_MODES, 'auto'))}")


def gemm_weight_elements(cfg: GPT2Config) -> int:
    """Elements of the weights the GEMMs read, which have a bf16 copy under ``bf16``: the
    tied embedding (the head) and each block's q, k, v, c_proj, c_fc and mlp c_proj."""
    E, F = cfg.n_embd, cfg.n_inner
    return cfg.vocab_size * E + cfg.n_layer * (4 * E * E + 2 * E * F)


def bytes_per_element(precision: str) -> dict:
    """What each category stores per element under ``precision`` (``auto``: as fp32)."""
    _check_precision(precision)
    bf16 = precision in ("bf16", "bf16-storage")
    return {"parameters": "4 (fp32 master)" + (" + 2 (bf16 copy, GEMM weights)"
                                                if precision == "bf16" else ""),
            "gradients": "4", "optimizer_state": "4 per slot",
            "activations": "2 (GEMM inputs, attention probabilities, GELU input) and 4 "
                           "(residual stream, layer-norm statistics), 8 (token ids)" if bf16
                           else "4, 8 (token ids)",
            "temporaries": "4, plus the bf16 operand copies" if bf16 else "4"}


def precision_categories(cfg: GPT2Config, batch: int, seq_len: int, optimizer: str,
                         precision: str) -> dict:
    """``categories`` under a precision mode: the saved activations sized by their
    declared bf16 fields, the parameters with their bf16 copies under ``bf16``, and the
    temporaries with the conversion copies a block's backward holds at once (under
    ``bf16`` the bf16 copies of the attention probabilities and of the MLP's hidden
    gradient, under ``bf16-storage`` the widened GELU output)."""
    _check_precision(precision)
    mode = "fp32" if precision == "auto" else precision
    cats = categories(cfg, batch, seq_len, optimizer)
    B, T, H, F = batch, seq_len, cfg.n_head, cfg.n_inner
    if mode == "bf16":
        cats["parameters"] += BF16 * gemm_weight_elements(cfg)
    if mode != "fp32":
        cats["activations"] = Activations.nbytes(cfg, B, T, mode)
        cats["temporaries"] += (BF16 * (B * H * T * T + B * T * F) if mode == "bf16"
                                else F32 * B * T * F)
    return cats
