"""Shared checks for tiled ops."""
from __future__ import annotations

import errno

import numpy as np

from nntile_lab._lib import ffi, lib
from nntile_lab.runtime import MIB, OutOfMemory, Runtime, device_tasks_in_flight
from nntile_lab.tensor import TiledTensor, empty


class SubmitError(RuntimeError):
    """StarPU refused a task."""


def check(ret: int) -> None:
    """Raise if a submit helper returned an error code (kept out of the hot path)."""
    if ret == -errno.E2BIG:
        raise _task_too_big()
    if ret == -errno.ENODEV:
        raise _no_implementation()
    if ret == -errno.EFBIG:
        raise _task_too_big_for_device()
    if ret == -errno.ENOMEM:   # the memory guard (kernels/runtime/guard.c)
        raise Runtime.current().guard_refusal()
    if ret:
        raise SubmitError(f"starpu_task_submit failed with code {ret}")


class NoImplementation(SubmitError):
    """An op has no implementation for the kind of worker its tasks are confined to."""


def _no_implementation() -> NoImplementation:
    op = lib.nl_unplaceable_op()
    name = ffi.string(lib.nl_op_name(op)).decode() if op >= 0 else "an op's"
    rt = Runtime.active
    where = rt.where if rt is not None else "?"
    return NoImplementation(
        f"the {name} task has no {where} implementation, and tasks are confined to "
        f"{where} workers (Runtime.on({where!r})): run this op outside that block, or give "
        f"its row in kernels/codelets.py an {where} implementation")


def _task_too_big() -> OutOfMemory:
    """The refused task (its tiles together exceed the RAM limit: StarPU would wait
    forever for memory) as an error naming the op, the bytes and the fix."""
    op = ffi.new("int *")
    nbytes = lib.nl_refused_task(op)
    name = ffi.string(lib.nl_op_name(op[0])).decode() if op[0] >= 0 else "a"
    rt = Runtime.active
    limit = rt.memory_limit_mb if rt is not None else None
    mib = 1 << 20
    return OutOfMemory(
        f"a {name} task needs {nbytes / mib:.1f} MiB of tiles in RAM at once, more than "
        f"memory_limit_mb={limit}: StarPU could never run it (a disk node does not help: "
        f"all of a task's tiles must be in RAM). Use smaller tiles for this op, or raise "
        f"memory_limit_mb to at least {-(-nbytes // mib) + 1}")


def _task_too_big_for_device() -> OutOfMemory:
    """The refused task (its tiles together exceed an accelerator's memory limit: StarPU
    would evict and retry forever) as an error naming the op, the bytes, the cap and the
    fixes."""
    op, tile = ffi.new("int *"), ffi.new("int64_t *")
    nbytes = lib.nl_device_refused_task(op, tile)
    name = ffi.string(lib.nl_op_name(op[0])).decode() if op[0] >= 0 else "a"
    rt = Runtime.active
    kind = getattr(rt, "device_kind", None) or "opencl"
    device, option = {"opencl": ("OpenCL device", "opencl_memory_limit_mb"),
                      "cuda": ("GPU", "cuda_memory_limit_mb")}[kind]
    limit = getattr(rt, option, None)
    cap = (f"{option}={limit}" if limit is not None
           else f"the {device}'s {rt.device_memory_bytes() / MIB:.0f} MiB"
           if rt is not None and rt.alive else f"the {device}'s memory")
    k = device_tasks_in_flight(kind)
    return OutOfMemory(
        f"a {name} task needs {nbytes / MIB:.1f} MiB of tiles on the {device} at once "
        f"(its largest tile {tile[0] / MIB:.1f} MiB), more than 1/{k} of {cap} (the "
        f"{kind.replace('opencl', 'OpenCL').replace('cuda', 'CUDA')} worker holds the tiles "
        f"of {k} tasks at once: STARPU_{kind.upper()}_PIPELINE): StarPU would evict and retry "
        f"forever. Raise {option} (--{option.replace('_', '-')}) to at least "
        f"{-(-k * nbytes // MIB)}, use smaller tiles for this op, or run it on the CPU "
        "workers (with rt.on('cpu'))")


def no_alias(op: str, outputs: dict, inputs: dict, in_place: tuple = ()) -> None:
    """Refuse an output that shares tiles with another operand (itself or through a
    view): the op would read tiles it already overwrote. ``in_place`` names the
    inputs an output may be *exactly* (same layout, so tile i only feeds tile i:
    element-wise kernels that read an element before writing it)."""
    outs = [(n, t) for n, t in outputs.items() if t is not None]
    operands = outs + [(n, t) for n, t in inputs.items() if t is not None]
    for i, (oname, o) in enumerate(outs):
        for name, t in operands[i + 1:]:
            if o.storage is not t.storage:
                continue
            if name in in_place and o.traits == t.traits:
                continue
            how = "is" if o is t else "shares its tiles with"
            raise ValueError(f"{op}: {oname} {how} {name} ({t!r}); the op would overwrite "
                             f"tiles it still reads: pass a separate {oname}"
                             + (" (or None for a new one)" if oname == "out" else ""))


def same_layout(*tensors: TiledTensor, names: str = "") -> None:
    """Every tensor must have the first one's shape and tile shape."""
    first = tensors[0]
    for t in tensors[1:]:
        if t.traits != first.traits:
            raise ValueError(f"{names + ': ' if names else ''}shapes/tiles differ: "
                             f"{first!r} vs {t!r}; element-wise ops need equal shapes and "
                             "equal tile shapes")


def need_dtype(t: TiledTensor, dtype, what: str) -> None:
    if t.dtype != dtype:     # numpy compares a dtype with a name or a type as with a dtype
        raise TypeError(f"{what} must be {np.dtype(dtype).name}, got {t.dtype.name}")


def output(out: TiledTensor | None, like: TiledTensor, what: str = "out") -> TiledTensor:
    """``out`` if given (checked against ``like``), else a new tensor like it."""
    if out is None:
        return empty(like.shape, like.tile_shape, like.dtype)
    same_layout(like, out, names=what)
    return out
