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
take 2 bytes (``bf16``, ``bf16-storage``), and so do the logits and their gradient (the
head's temporaries, where n_embd is one tile: ``Casts.logits_dtype``); ``bf16`` adds a
2-byte copy of every GEMM weight to the parameters (wte and each block's q, k, v, c_proj,
c_fc, mlp c_proj); gradients and optimizer state stay float32.

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

With OpenCL workers (``nopencl``, each device capped at ``opencl_memory_limit_mb``: "the
GPU"), the plan has a ``device`` part (``DevicePlan``): each device holds at most its cap
and the rest of the peak stays in RAM, the overflow (``spill_bytes`` = peak − nopencl·cap;
StarPU evicts device tiles to RAM and brings them back); a task on the device needs all
its tiles there at once, and an OpenCL worker holds two tasks' tiles at once (StarPU's
pipeline), so twice the largest task that may run there (its op has an OpenCL
implementation) must fit under the cap, or the run is cannot_run. RAM is planned as
without a device (the whole peak: a tile on the device may keep its RAM copy), and the
RAM cap → disk as above.

``check(spec)`` raises ``MemoryPlanError`` for cannot_run, before any task exists.
Besides StarPU's tiles the process holds the interpreter and libraries
(``PROCESS_BASE_BYTES``, measured) and numpy copies at start and at checkpoints;
``rss_bytes`` adds them, for caps on the whole process (``starpu_limit_mb``).
"""
from __future__ import annotations

import functools
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
                 f"  {'peak (StarPU)':<16} {self.peak_bytes / MIB:10.1f} MiB",
                 f"  {'process RSS':<16} {self.rss_bytes / MIB:10.1f} MiB (estimated)",
                 f"  largest task     {self.largest_task_bytes / MIB:10.2f} MiB "
                 f"({self.largest_task})",
                 *([self.device.report()] if self.device else []),
                 f"verdict: {self.verdict}"
                 + (f", disk {self.disk_bytes / MIB:.0f} MiB" if self.disk_bytes else "")]
        if self.reason:
            lines.append(self.reason)
        return "\n".join(lines)


def _resolve(spec, batch, seq_len, optimizer, memory_limit_mb, ooc_dir, ooc_size_mb, ncpu,
             nopencl=None, opencl_memory_limit_mb=None, precision=None):
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
        nopencl = spec.nopencl if nopencl is None else nopencl
        if opencl_memory_limit_mb is None:
            opencl_memory_limit_mb = spec.opencl_memory_limit_mb
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
                     ooc_size_mb=DEFAULTS.ooc_size_mb if ooc_size_mb is None else ooc_size_mb)


def categories(cfg: GPT2Config, batch: int, seq_len: int, optimizer: str = "adamw",
               precision: str = "fp32") -> dict:
    """Bytes per category at the peak of a training step (see the module docstring)."""
    if precision != "fp32":
        return precision_categories(cfg, batch, seq_len, optimizer, precision)
    n = cfg.num_params(with_positions=True)
    return {"parameters": F32 * n, "gradients": F32 * n,
            "optimizer_state": F32 * n * OPTIMIZER_SLOTS[optimizer],
            "activations": Activations.nbytes(cfg, batch, seq_len),
            "temporaries": max(F32 * head_temporaries(cfg, batch, seq_len),
                               block_temporaries(cfg, batch, seq_len))}


def head_temporaries(cfg: GPT2Config, batch: int, seq_len: int) -> int:
    """Elements of the head's logits and their gradient alive at once: 1.5·BTV (logits
    tiles are freed as their gradient tiles appear; the factor is measured)."""
    return 3 * batch * seq_len * cfg.vocab_size // 2


def block_temporaries(cfg: GPT2Config, batch: int, seq_len: int) -> int:
    """Bytes of one block's backward temporaries in float32 (the larger of attention's and
    the MLP's)."""
    B, T, E, F, H = batch, seq_len, cfg.n_embd, cfg.n_inner, cfg.n_head
    return F32 * max(2 * B * H * T * T + 3 * B * T * E, 2 * B * T * F + 2 * B * T * E)


def largest_task(cfg: GPT2Config, batch: int, seq_len: int) -> tuple[int, str]:
    """The largest working set of one task (bytes) and which task has it."""
    tasks = task_bytes(cfg, batch, seq_len)
    name = max(tasks, key=tasks.get)
    return tasks[name], name


# the codelets (kernels/codelets.py) behind each of task_bytes's tasks: the task may run
# on an OpenCL device when one of them has an OpenCL implementation
TASK_OPS = {"mlp c_fc gemm": ("gemm",), "mlp c_proj gemm": ("gemm",),
            "attention q/k/v gemm": ("gemm",), "attention scores gemm": ("gemm",),
            "attention softmax backward": ("softmax_backward", "softmax_backward_tile"),
            "head gemm": ("gemm",), "cross-entropy backward": ("cross_entropy_backward",),
            "optimizer update": ("adamw", "sgd", "sgd_momentum")}


def device_ops() -> set[str] | None:
    """The ops with an OpenCL implementation in this build (None without the compiled
    extension: then every task is taken to be able to run on the device)."""
    try:
        from nntile_lab._lib import ffi, lib
    except ImportError:
        return None
    return {ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())
            if lib.nl_op_has_opencl(i)}


def largest_device_task(cfg: GPT2Config, batch: int, seq_len: int) -> tuple[int, str]:
    """The largest working set of one task that may run on an OpenCL device (bytes, which
    task); (0, "none") when no task of the step can."""
    ops = device_ops()
    tasks = {k: v for k, v in task_bytes(cfg, batch, seq_len).items()
             if ops is None or ops.intersection(TASK_OPS[k])}
    if not tasks:
        return 0, "none"
    name = max(tasks, key=tasks.get)
    return tasks[name], name


def task_bytes(cfg: GPT2Config, batch: int, seq_len: int) -> dict[str, int]:
    """The working set (bytes of its buffers) of each of the step's largest tasks."""
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
    return {k: F32 * v for k, v in tasks.items()}


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
    if s["nopencl"]:
        plan.device = _device_plan(cfg, s, peak)
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


def _device_plan(cfg: GPT2Config, s: dict, peak: int) -> DevicePlan:
    """Where the peak sits with OpenCL devices: under their caps, the rest in RAM."""
    n, cap_mb = s["nopencl"], s["opencl_memory_limit_mb"]
    room = math.inf if cap_mb is None else n * cap_mb * MIB
    resident = int(min(peak, room))
    task, name = largest_device_task(cfg, s["batch"], s["seq_len"])
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
            "temporaries": "2 (the logits and their gradient, where n_embd is one tile), 4 "
                           "(the rest), plus the bf16 operand copies" if bf16 else "4"}


def precision_categories(cfg: GPT2Config, batch: int, seq_len: int, optimizer: str,
                         precision: str) -> dict:
    """``categories`` under a precision mode: the saved activations sized by their
    declared bf16 fields, the parameters with their bf16 copies under ``bf16``, and the
    temporaries: the head's logits and their gradient in bf16 (``bf16_logits``), against
    a block's backward with the conversion copies it holds at once (under ``bf16`` the
    bf16 copies of the attention probabilities and of the MLP's hidden gradient, under
    ``bf16-storage`` the widened GELU output)."""
    _check_precision(precision)
    mode = "fp32" if precision == "auto" else precision
    cats = categories(cfg, batch, seq_len, optimizer)
    B, T, H, F = batch, seq_len, cfg.n_head, cfg.n_inner
    if mode == "bf16":
        cats["parameters"] += BF16 * gemm_weight_elements(cfg)
    if mode != "fp32":
        cats["activations"] = Activations.nbytes(cfg, B, T, mode)
        head = ((BF16 if bf16_logits(cfg) else F32) * head_temporaries(cfg, B, T))
        block = block_temporaries(cfg, B, T) + (BF16 * (B * H * T * T + B * T * F)
                                                if mode == "bf16" else F32 * B * T * F)
        cats["temporaries"] = max(head, block)
    return cats


def bf16_logits(cfg: GPT2Config) -> bool:
    """Whether a bf16 mode stores the logits in bf16: where n_embd is one tile (the head's
    float32 sums then stay in one task; ``nn.precision.Casts.logits_dtype``)."""
    return cfg.tile("embd_tile", cfg.n_embd) == cfg.n_embd
