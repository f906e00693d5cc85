"""Memory planner: will a run fit, and if not, how much disk does it need?

``estimate(spec)`` reads the model, not a table: it builds the model the spec names on
shape-only tensors and runs a run's very code (``nn.meta.dry_run``): the model's build, its
optimizer's state, one training step and one validation batch, recording every task with the
tiles it reads and writes, every allocation and free — nothing is allocated, no task
submitted, no StarPU needed. From that record, the peak: what the runtime holds at the run's
worst allocation (``Runtime.reserve`` counts every tensor whole, from its creation to its
free, and refuses an allocation past its cap), by category (N parameters, fp32 = 4 bytes):

  parameters        the float32 masters (4·N) and, under ``bf16``, the bf16 copy of each
                    parameter a GEMM reads (``Param.gemm``)
  gradients         4·N
  optimizer_state   4·N·slots (AdamW/Adam: m and v; SGD with momentum: one buffer)
  activations       what the forward keeps for the backward: every layer's saved record
                    (``Layer.Saved``: in bf16 where a bf16 mode keeps it), the token ids
                    and the loss's gradient the head computes with it
  temporaries       the rest of what is held at the worst allocation (e.g. the head's
                    logits and their gradient at once): each tensor whole from its
                    creation to its free, in submission order

The peak is their sum: a cap of ⌈peak⌉ MiB runs (tests/test_plan_is_true.py). StarPU
allocates fewer bytes at once (``allocated_bytes``): a tile from the task that first writes
it to the last that uses it — what its accounting, the process's RSS and a device see.
The largest single task's working set (the tiles of its buffers, e.g. the head's gemm: an
activation tile, a vocabulary tile of the embedding and a logits tile), also from the dry
run, bounds the cap from below: each worker needs its task's tiles in RAM at once.

Verdicts, for a ``memory_limit_mb`` cap on StarPU's RAM:
  fits              the peak is under the cap (or there is no cap);
  fits_with_disk    the peak is over the cap, an out-of-core directory is given, and
                    its disk node (``ooc_size_mb``) and free space hold the overflow
                    (``disk_bytes`` = 1.1·peak: clean tiles keep their disk copy; more
                    where the peak plus (workers + 1) working sets of the largest task,
                    which the runtime keeps free out of core, need it);
  cannot_run        the cap is below ``ncpu`` tasks' working sets, or the overflow has
                    no disk node, or the disk node or free space is too small, or the
                    directory is not writable.

With OpenCL workers (``nopencl``, each device capped at ``opencl_memory_limit_mb``: "the
GPU"), the plan has a ``device`` part (``DevicePlan``): each device holds at most its cap
and the rest of the tiles allocated at once stays in RAM, the overflow (``spill_bytes`` =
allocated − nopencl·cap; StarPU evicts device tiles to RAM and brings them back); a task
on the device needs all its tiles there at once, and an OpenCL worker holds two tasks'
tiles at once (StarPU's pipeline), so twice the largest task that may run there (its op has
an OpenCL implementation) must fit under the cap, or the run is cannot_run. RAM is planned
as without a device (the whole peak: a tile on the device may keep its RAM copy), and the
RAM cap → disk as above.

``check(spec)`` raises ``MemoryPlanError`` for cannot_run, before any task exists.
Besides StarPU's tiles the process holds the interpreter and libraries
(``PROCESS_BASE_BYTES``, measured) and numpy copies at start and at checkpoints;
``rss_bytes`` adds them, for caps on the whole process (``starpu_limit_mb``).
"""
from __future__ import annotations

import functools
import json
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from nntile_lab.nn import backend
from nntile_lab.nn.config import MODELS, TILE_FIELDS, describe, model_class, model_name
from nntile_lab.nn.meta import MAX_TASKS, TooManyTasks, dry_run
from nntile_lab.rss import peak_rss_bytes, rss_bytes  # noqa: F401  (memory.peak_rss_bytes)
from nntile_lab.spec import DEFAULTS, parse_hints

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
# tasks whose tiles an OpenCL worker holds on its device at once: StarPU's
# STARPU_OPENCL_PIPELINE, default 2 (runtime.opencl_tasks_in_flight, which reads it)
TASKS_ON_DEVICE = 2
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries")
VERDICTS = ("fits", "fits_with_disk", "cannot_run")


@dataclass
class DevicePlan:
    """The OpenCL devices' part of a plan (bytes): what each holds, what spills to RAM."""

    nopencl: int
    limit_mb: int | None            # each device's cap (None: its whole memory, unknown here)
    resident_bytes: int             # on the devices at the peak (at most nopencl · cap)
    spill_bytes: int                # the rest of the peak: in RAM, the devices' overflow
    largest_task_bytes: int         # the largest task that may run on a device
    largest_task: str

    def report(self) -> str:
        cap = ("uncapped (the device's memory; not checked here)" if self.limit_mb is None
               else f"cap {self.limit_mb} MiB each")
        return (f"  devices          {self.nopencl} OpenCL, {cap}\n"
                f"  {'on the devices':<16} {self.resident_bytes / MIB:10.1f} MiB at the peak\n"
                f"  {'spilled to RAM':<16} {self.spill_bytes / MIB:10.1f} MiB (evicted and "
                f"brought back)\n"
                f"  largest on dev.  {self.largest_task_bytes / MIB:10.2f} MiB "
                f"({self.largest_task})")


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
    device: DevicePlan | None = None    # with OpenCL workers (nopencl ≥ 1)
    allocated_bytes: int = 0        # StarPU's tiles allocated at once (≤ peak_bytes)

    def to_dict(self) -> dict:
        return asdict(self)

    def report(self) -> str:
        rows = [f"  {k:<16} {v / MIB:10.1f} MiB" for k, v in self.categories.items()]
        cap = ("no RAM cap" if self.memory_limit_mb is None
               else f"RAM cap {self.memory_limit_mb} MiB")
        precision = self.details.get("precision", "fp32")
        if precision != "fp32":
            cap += f", precision {precision}"
        lines = [f"memory plan ({cap}):", *rows,
                 f"  {'peak (held)':<16} {self.peak_bytes / MIB:10.1f} MiB (the runtime's "
                 "count at the worst allocation: tensors whole)",
                 f"  {'allocated':<16} {self.allocated_bytes / MIB:10.1f} MiB (StarPU's tiles "
                 "at once)",
                 f"  {'process RSS':<16} {self.rss_bytes / MIB:10.1f} MiB (estimated)",
                 f"  largest task     {self.largest_task_bytes / MIB:10.2f} MiB "
                 f"({self.largest_task})",
                 *([self.device.report()] if self.device else []),
                 f"verdict: {self.verdict}"
                 + (f", disk {self.disk_bytes / MIB:.0f} MiB" if self.disk_bytes else "")]
        if self.reason:
            lines.append(self.reason)
        return "\n".join(lines)


def _is_config(spec) -> bool:
    return any(type(spec) is cls for cls, _ in MODELS.values())


def _resolve(spec, batch, seq_len, optimizer, memory_limit_mb, ooc_dir, ooc_size_mb, ncpu,
             nopencl=None, opencl_memory_limit_mb=None, precision=None):
    """(model config, settings) from an ExperimentSpec, or a model config (``GPT2Config``,
    …) plus keywords."""
    if precision is None:
        precision = DEFAULTS.precision if _is_config(spec) else spec.precision
    _check_precision(precision)
    hints = DEFAULTS.hints
    if _is_config(spec):
        if batch is None or seq_len is None:
            raise ValueError(f"estimate({type(spec).__name__}, ...) needs batch= and seq_len=")
        cfg = spec
        opt = optimizer or DEFAULTS.optimizer
    else:
        cfg = spec.model_config()
        batch = spec.batch if batch is None else batch
        seq_len = spec.seq_len if seq_len is None else seq_len
        opt = optimizer or spec.optimizer
        memory_limit_mb = spec.memory_limit_mb if memory_limit_mb is None else memory_limit_mb
        ooc_dir = spec.ooc_dir if ooc_dir is None else ooc_dir
        ooc_size_mb = spec.ooc_size_mb if ooc_size_mb is None else ooc_size_mb
        ncpu = spec.ncpu if ncpu is None else ncpu
        nopencl = spec.nopencl if nopencl is None else nopencl
        if opencl_memory_limit_mb is None:
            opencl_memory_limit_mb = spec.opencl_memory_limit_mb
        hints = spec.hints
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
                     nopencl=nopencl or 0, opencl_memory_limit_mb=opencl_memory_limit_mb,
                     memory_limit_mb=memory_limit_mb, ooc_dir=ooc_dir,
                     hints=sorted(parse_hints(hints, out_of_core=memory_limit_mb is not None)),
                     ooc_size_mb=DEFAULTS.ooc_size_mb if ooc_size_mb is None else ooc_size_mb)


# ---- what one training step holds: a dry run of the model's own code --------------------
@dataclass(frozen=True)
class StepAccount:
    """A dry-run step's bytes (``account``) and its tasks' working sets."""

    masters: int            # the float32 parameters
    copies: int             # their bf16 copies (under bf16)
    gradients: int
    activations: int        # what the forward keeps for the backward
    peak: int               # the most tiles the step holds at once (StarPU allocates)
    held: int               # the most the runtime counts at an allocation (the whole run)
    tasks: dict             # "where op" → (bytes of its largest task, op)
    task_counts: dict       # op → tasks per step
    init_staging: int       # elements of the largest initialisation chunk (numpy)
    largest_tile: int       # bytes of the largest parameter tile


def account(cfg, batch: int, seq_len: int, precision: str = "fp32",
            hints=(), optimizer: str = "adamw") -> StepAccount:
    """A training run of ``cfg``'s model on ``batch × seq_len`` tokens, run dry: the model
    built, its optimizer's state, one step, one validation batch (cached per arguments: a
    plan is asked for many times)."""
    mode = "fp32" if precision == "auto" else precision
    return _account(model_class(model_name(cfg)), json.dumps(asdict(cfg), sort_keys=True),
                    batch, seq_len, mode, tuple(sorted(hints)), OPTIMIZER_SLOTS[optimizer])


@lru_cache(maxsize=64)
def _account(cls, cfg_json: str, batch: int, seq_len: int, precision: str,
             hints: tuple, slots: int) -> StepAccount:
    cfg = cls.config_class.from_dict(json.loads(cfg_json))
    try:
        return _dry_account(cls, cfg, batch, seq_len, precision, hints, slots)
    except TooManyTasks:
        tiles = ", ".join(f"{f}={getattr(cfg, f)}" for f in TILE_FIELDS)
        shape = ", ".join(f"{f}={getattr(cfg, f)}" for f in ("n_layer", "n_embd", "n_head",
                                                               "n_inner", "vocab_size"))
        raise ValueError(f"a step of batch={batch} sequences of seq_len={seq_len} tokens on "
                         f"this model ({shape}) in tiles of {tiles} submits more than "
                         f"{MAX_TASKS:,} tasks, too many to plan or to run: use larger tiles "
                         "(--batch-tile, --seq-tile, …) or a smaller --batch") from None


def _dry_account(cls, cfg, batch: int, seq_len: int, precision: str, hints: tuple,
                 slots: int) -> StepAccount:
    with dry_run(hints=frozenset(hints)) as dry:
        # what a run allocates, in its order (experiment.build, train.trainer): the model
        # (parameters, their bf16 copies, gradients), the optimizer's state (one tensor
        # like each parameter per slot: optim.Optimizer), then steps and evaluations
        model = cls(cfg, seed=0, precision=precision)
        for _ in range(slots):
            for p in model.params.values():
                backend.empty(p.shape, p.tile_shape, p.dtype)
        ids = np.zeros((batch, seq_len), np.int64)
        model.forward_backward(ids, ids)
        counts = dict(dry.counts())   # one step's tasks
        backend.empty((1,)).free()   # the update's gradient norm (Optimizer.grad_norm)
        model.loss(ids, ids)
    size = lambda ts: sum(math.prod(t.shape) * t.dtype.itemsize for t in ts)  # noqa: E731
    masters, copies = size(model.params.values()), size(model.params16.values())
    grads = size(model.grads.values())
    activations = dry.alive_at("forward") - dry.alive_at("step")
    tasks: dict = {}
    for t in dry.tasks:
        key = f"{t.where} {t.op}".strip()
        if t.nbytes > tasks.get(key, (0, ""))[0]:
            tasks[key] = (t.nbytes, t.op)
    tile = max(math.prod(p.tile_shape) for p in model.parameters())
    tasks["optimizer update"] = (F32 * 4 * tile, "adamw sgd sgd_momentum")   # p, g, m, v
    return StepAccount(masters, copies, grads, activations,
                       dry.peak(since="step", until="backward"), dry.held_peak(), tasks,
                       counts, model.init_staging_elems(), F32 * tile)


def categories(cfg, batch: int, seq_len: int, optimizer: str = "adamw",
               precision: str = "fp32", hints=()) -> dict:
    """Bytes per category at the run's worst allocation, as the runtime counts them (see
    the module docstring): their sum is the plan's peak."""
    _check_precision(precision)
    a = account(cfg, batch, seq_len, precision, hints, optimizer)
    cats = _kept(a, optimizer)
    return cats | {"temporaries": max(0, a.held - sum(cats.values()))}


def allocated_peak(cfg, batch: int, seq_len: int, optimizer: str = "adamw",
                   precision: str = "fp32", hints=()) -> int:
    """The most bytes of tiles StarPU allocates at once in a step (a tile from the task
    that first writes it to the last that uses it): what its memory accounting and the
    process's RSS see, at most the plan's peak (the runtime reserves tensors whole)."""
    a = account(cfg, batch, seq_len, precision, hints, optimizer)
    cats = _kept(a, optimizer)
    step = a.masters + a.copies + a.gradients + a.activations
    return sum(cats.values()) + max(0, a.peak - step)


def _kept(a: StepAccount, optimizer: str) -> dict:
    """The categories held through the step (all but the temporaries)."""
    return {"parameters": a.masters + a.copies, "gradients": a.gradients,
            "optimizer_state": a.masters * OPTIMIZER_SLOTS[optimizer],
            "activations": a.activations}


def largest_task(cfg, batch: int, seq_len: int, precision: str = "fp32",
                 hints=(), optimizer: str = "adamw") -> tuple[int, str]:
    """The largest working set of one task (bytes) and which task has it."""
    tasks = account(cfg, batch, seq_len, precision, hints, optimizer).tasks
    name = max(tasks, key=lambda k: tasks[k][0])
    return tasks[name][0], name


def device_ops() -> set[str] | None:
    """The ops with an OpenCL implementation in this build (None without the compiled
    extension: then every task is taken to be able to run on the device)."""
    try:
        from nntile_lab._lib import ffi, lib
    except ImportError:
        return None
    return {ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())
            if lib.nl_op_has_opencl(i)}


def largest_device_task(cfg, batch: int, seq_len: int, precision: str = "fp32",
                        hints=(), optimizer: str = "adamw") -> tuple[int, str]:
    """The largest working set of one task that may run on an OpenCL device (bytes, which
    task); (0, "none") when no task of the step can."""
    ops = device_ops()
    run = account(cfg, batch, seq_len, precision, hints, optimizer)
    tasks = {k: b for k, (b, op) in run.tasks.items()
             if ops is None or ops.intersection(op.split())}
    if not tasks:
        return 0, "none"
    name = max(tasks, key=tasks.get)
    return tasks[name], name


# ---- the machine's RAM: a cap even when none is given ----------------------------------
def machine_ram_bytes() -> int | None:
    """The RAM this process may use: the machine's physical memory, or its cgroup's limit
    (a container, a Slurm job) where that is lower; None where neither can be read."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                limit = int(f.read().strip())   # "max": no limit (ValueError)
        except (OSError, ValueError):
            continue
        ram = limit if ram is None else min(ram, limit)
    return ram


def within_machine(plan: MemoryPlan) -> MemoryPlan:
    """``plan`` with the machine's RAM as a cap: a run whose process would need more RAM
    than the machine has cannot run, cap or no cap (a 1.5 TB model "fit" with no cap given,
    and a widget would have started it). Out of core the disk's free space is checked
    already (``_disk_problem``)."""
    ram = machine_ram_bytes()
    if plan.verdict == "cannot_run" or ram is None or plan.rss_bytes <= ram:
        return plan
    base = process_base_bytes()
    room = max(16, (ram - base) // MIB * 3 // 4)   # leave the rest of the machine a quarter
    need, have = plan.rss_bytes / 2**30, ram / 2**30
    if plan.memory_limit_mb is None:
        how = (f"train out of core (--memory-limit-mb {room} --ooc-dir DIR: tiles beyond the "
               "cap go to disk), or a smaller model")
    else:
        how = f"lower --memory-limit-mb to {room} or less" + (
            "" if plan.details.get("ooc_dir") else " and give --ooc-dir DIR (a disk node)")
    return _cannot(plan, f"the run needs {need:.1f} GiB of RAM (the step's "
                   f"{plan.peak_bytes / 2**30:.1f} GiB of tiles"
                   + (f" under the {plan.memory_limit_mb} MiB cap" if plan.memory_limit_mb
                      else "") + f", and the process) but this machine has {have:.1f} GiB: "
                   + how)


def _on_this_machine(fn):
    """``estimate``'s verdict also against the machine's RAM (``within_machine``)."""
    @functools.wraps(fn)
    def estimate_here(*args, **kwargs) -> MemoryPlan:
        return within_machine(fn(*args, **kwargs))
    return estimate_here


@_on_this_machine
def estimate(spec, batch: int | None = None, seq_len: int | None = None, *,
             optimizer: str | None = None, memory_limit_mb: int | None = None,
             ooc_dir: str | None = None, ooc_size_mb: int | None = None,
             ncpu: int | None = None, nopencl: int | None = None,
             opencl_memory_limit_mb: int | None = None,
             precision: str | None = None) -> MemoryPlan:
    """The memory plan of one training run: an ``ExperimentSpec`` (its runtime fields
    give the caps, devices and disk), or a ``GPT2Config`` with ``batch`` and ``seq_len``;
    keywords override the spec's. ``precision`` ``auto`` plans for the mode that needs
    the most bytes (fp32), as the mode is chosen only when the run starts."""
    cfg, s = _resolve(spec, batch, seq_len, optimizer, memory_limit_mb, ooc_dir,
                      ooc_size_mb, ncpu, nopencl, opencl_memory_limit_mb, precision)
    step = (cfg, s["batch"], s["seq_len"], s["precision"], s["hints"], s["optimizer"])
    cats = categories(*step[:3], s["optimizer"], *step[3:5])
    # the verdict's peak: what Runtime.reserve counts at the run's worst allocation
    peak = sum(cats.values())
    # what StarPU allocates at once, tile by tile (its accounting, the process's RSS)
    allocated = allocated_peak(*step[:3], s["optimizer"], *step[3:5])
    task_bytes, task_name = largest_task(*step)
    cap_mb = s["memory_limit_mb"]
    cap = math.inf if cap_mb is None else cap_mb * MIB
    # initialisation draws the parameters in row bands (LanguageModel.init_weights) in
    # float64 and casts them to float32 while StarPU holds the parameters; then a step
    # holds the peak
    largest_param = account(*step).init_staging
    init = min(cats["parameters"], cap) + (I64 + F32) * largest_param
    rss = process_base_bytes() + int(max(init, min(allocated, cap)))
    # a checkpoint gathers parameters and optimizer state into numpy (12·N bytes for AdamW)
    ckpt = cats["parameters"] + cats["optimizer_state"]
    details = dict(s, model=model_name(cfg), ooc_backend="o_direct",
                   largest_param=largest_param, checkpoint_staging_bytes=ckpt)
    plan = MemoryPlan(cats, peak, task_bytes, task_name, rss, cap_mb, "fits", details=details,
                      allocated_bytes=allocated)
    if cap_mb is not None and cap_mb < 16:   # what Runtime refuses never "fits"
        return _cannot(plan, f"--memory-limit-mb {cap_mb} is below 16 MiB, the smallest "
                       "memory limit StarPU takes: give 16 or more")
    if s["nopencl"]:
        plan.device = _device_plan(cfg, s, allocated)
        dev, k = plan.device, TASKS_ON_DEVICE
        if dev.limit_mb is not None and k * dev.largest_task_bytes > dev.limit_mb * MIB:
            need = math.ceil(k * dev.largest_task_bytes / MIB)
            return _cannot(plan, f"--opencl-memory-limit-mb {dev.limit_mb} is below {k} × "
                           f"the largest task that may run on the OpenCL device: "
                           f"{dev.largest_task_bytes / MIB:.1f} MiB of tiles at once "
                           f"({dev.largest_task}), and the OpenCL worker holds {k} tasks' "
                           f"tiles at once; raise --opencl-memory-limit-mb to at least "
                           f"{need}, or use smaller tiles (--vocab-tile, --inner-tile, "
                           "--batch-tile, --seq-tile)")
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


def _device_plan(cfg, s: dict, peak: int) -> DevicePlan:
    """Where the tiles StarPU allocates at once (``peak``) sit with OpenCL devices: under
    their caps, the rest in RAM (a device has no reserve: StarPU allocates there tile by
    tile)."""
    n, cap_mb = s["nopencl"], s["opencl_memory_limit_mb"]
    room = math.inf if cap_mb is None else n * cap_mb * MIB
    resident = int(min(peak, room))
    task, name = largest_device_task(cfg, s["batch"], s["seq_len"], s["precision"],
                                     s["hints"], s["optimizer"])
    return DevicePlan(n, cap_mb, resident, peak - resident, task, name)


def check(spec, **kw) -> MemoryPlan:
    """``estimate(spec, **kw)``; raises ``MemoryPlanError`` if the run cannot run."""
    plan = estimate(spec, **kw)
    if plan.verdict == "cannot_run":
        raise MemoryPlanError(f"cannot run under these memory settings: {plan.reason}")
    return plan


def ooc_overhead_bytes(spec) -> int:
    """What an out-of-core process holds besides StarPU's tiles and its base: transfers
    in flight, StarPU's per-tile and per-request structures, the allocator's slack.
    Bounded by 64 MiB plus the larger of 4 of the largest parameter tiles and 0.2 bytes per
    parameter: an empirical fit, not a model, above what peak RSS − StarPU's peak − base
    measured on the paper family (BENCHMARKS.md, "Measurements formerly in code comments")."""
    cfg = spec if _is_config(spec) else spec.model_config()
    tree = describe(cfg)
    largest = F32 * max(math.prod(p.tile_shape) for p in tree.parameters())
    return 64 * MIB + max(4 * largest, tree.num_params() // 5)


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
    if os.path.exists(ooc_dir) and not os.path.isdir(ooc_dir):
        return (f"--ooc-dir {ooc_dir} is a file, not a directory: give a directory for the "
                "disk node's files (it is created if missing)")
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


def gemm_weight_elements(cfg) -> int:
    """Elements of the parameters the GEMMs read, which have a bf16 copy under ``bf16``
    (GPT-2: the tied embedding — the head — and each block's projections), from the model."""
    return sum(p.size for p in describe(cfg).parameters() if p.gemm)
