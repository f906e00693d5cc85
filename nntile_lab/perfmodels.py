"""What StarPU's performance models learned, per op and kind of worker.

Every codelet has a history-based model (``kernels/codelets.py``): StarPU times each task
and keeps, per architecture (a CPU core, an OpenCL device, ...) and per data footprint
(the tiles' sizes), the mean and spread of the measured times. dmda, dmdas and the other
model-driven policies place a task where the model predicts it ends first; on unlike
workers their decisions are only as good as these means. Models are kept in
``$STARPU_HOME/.starpu/sampling/codelets`` between runs; StarPU takes about ten samples per
(op, footprint, arch) before it trusts one, or every sample under ``STARPU_CALIBRATE=1``.
Policies that do not use the models (eager, lws, ...) record nothing unless calibrating
(checked with StarPU 1.3.10) — and every runtime of ours calibrates (``kernels/runtime/
init.c`` sets conf.calibrate = 1: StarPU's negative-duration abort), so every run records.

``entries()``           the live models' entries (a runtime running, its tasks done): op,
                        arch ("cpu", "opencl", ...), devid, footprint, size_bytes, mean_us,
                        std_us, nsample.
``per_arch(entries)``   one row per op: its mean time per arch (over the footprints
                        measured on every arch, weighted by samples), the ratio
                        opencl / cpu and which arch the models say is faster.
``calibrate(spec)``     a few training steps of ``spec`` under dmda with
                        ``STARPU_CALIBRATE=1``, then ``entries()``: models for each arch
                        before a scheduler comparison.
``history()``           the models StarPU saved on disk (every earlier run on this
                        machine), read without StarPU: the same columns plus ``flops``
                        (``tune`` prices candidates' tasks with them before measuring any).
"""
from __future__ import annotations

import math
import os
import socket
from pathlib import Path

import numpy as np
import pandas as pd

ENTRY_COLUMNS = ["op", "arch", "devid", "footprint", "size_bytes", "mean_us", "std_us",
                 "nsample"]
# StarPU's device types in its model files (CPU - 0, CUDA - 1, OPENCL - 2)
FILE_ARCH = {0: "cpu", 1: "cuda", 2: "opencl"}
# the codelets' model symbols are "nl_<op>" (kernels/codegen.py)
SYMBOL_PREFIX = "nl_"


def _kinds() -> dict[int, str]:
    from nntile_lab._lib import lib  # the compiled extension: importing this must not load it
    return {lib.STARPU_CPU: "cpu", lib.STARPU_OPENCL: "opencl", lib.STARPU_CUDA: "cuda"}


def entries() -> pd.DataFrame:
    """The running runtime's models, one row per (op, arch, device, footprint) with
    samples. Call after ``rt.wait()``: StarPU updates the models as tasks end."""
    # loads the compiled extension: importing this module must not (readers of saved runs)
    from nntile_lab._lib import ffi, lib
    from nntile_lab.runtime import Runtime
    Runtime.current().wait()
    n = lib.nl_perfmodel_entries(ffi.NULL, 0)
    buf = ffi.new("struct nl_model_entry[]", max(n, 1))
    n = min(n, lib.nl_perfmodel_entries(buf, n))
    kinds = _kinds()
    rows = [{"op": ffi.string(lib.nl_op_name(e.op)).decode(), "arch": kinds.get(e.arch, "other"),
             "devid": e.devid, "footprint": e.footprint, "size_bytes": e.size,
             "mean_us": e.mean_us, "std_us": e.std_us, "nsample": e.nsample}
            for e in (buf[i] for i in range(n))]
    return pd.DataFrame(rows, columns=ENTRY_COLUMNS).sort_values(
        ["op", "arch", "size_bytes"], kind="stable").reset_index(drop=True)


def per_arch(ent: pd.DataFrame) -> pd.DataFrame:
    """Per op: ``<arch>_us`` (sample-weighted mean over the footprints every arch has, or
    over each arch's own where they share none), ``footprints`` (how many shared),
    ``nsample``, ``opencl_over_cpu`` (the time ratio; < 1: the device is faster) and
    ``faster`` (the arch with the least time, on the shared footprints; the only arch for
    ops measured on one)."""
    cols = ["op", "footprints", "nsample", "faster"]
    ent = ent[ent["nsample"] > 0] if not ent.empty else ent   # a footprint never timed
    if ent.empty:
        return pd.DataFrame(columns=cols)
    archs = [a for a in ("cpu", "opencl", "cuda") if a in set(ent["arch"])]
    rows = []
    for op, g in ent.groupby("op", sort=True):
        have = [a for a in archs if a in set(g["arch"])]
        # compare like with like: footprints (tile sizes) that every arch of the op ran
        shared = set.intersection(*(set(g[g["arch"] == a]["footprint"]) for a in have))
        if shared:   # none shared (a short calibration): each arch over its own footprints
            g = g[g["footprint"].isin(shared)]
        row = {"op": op, "footprints": len(shared), "nsample": int(g["nsample"].sum())}
        for a in have:
            s = g[g["arch"] == a]
            row[f"{a}_us"] = float(np.average(s["mean_us"], weights=s["nsample"]))
        row["faster"] = min(have, key=lambda a: row[f"{a}_us"])
        rows.append(row)
    out = pd.DataFrame(rows)
    if {"cpu_us", "opencl_us"} <= set(out.columns):
        out["opencl_over_cpu"] = out["opencl_us"] / out["cpu_us"]
    return out


def calibrate(spec, steps: int = 3) -> pd.DataFrame:
    """Train ``steps`` steps of ``spec`` (its workers, dmda) with every task's time
    recorded into the models (``STARPU_CALIBRATE=1``); returns ``entries()``. dmda runs a
    task on an arch whose model lacks its footprint, so each arch gets samples."""
    # the training stack sits in a layer above this module (pyproject's contracts)
    from nntile_lab.experiment import RandomTokens, build, runtime, step_function
    if steps < 1:
        raise ValueError(f"steps={steps!r} must be ≥ 1 (training steps to calibrate on)")
    spec = spec.replace(scheduler="dmda")
    saved = os.environ.get("STARPU_CALIBRATE")
    os.environ["STARPU_CALIBRATE"] = "1"   # read by starpu_conf_init when the runtime starts
    try:
        with runtime(spec) as rt:
            model, optimizer, schedule = build(spec)
            step = step_function(spec, rt, model, optimizer, schedule,
                                 RandomTokens(spec.vocab_size))
            for k in range(steps):
                step(k)
            return entries()
    finally:
        if saved is None:
            os.environ.pop("STARPU_CALIBRATE", None)
        else:
            os.environ["STARPU_CALIBRATE"] = saved


def model_dir() -> Path:
    """Where StarPU keeps the codelets' models: ``$STARPU_PERF_MODEL_DIR`` or
    ``$STARPU_HOME/.starpu/sampling`` (default home: ``~``), ``codelets/45`` in it (the
    file format of StarPU 1.3)."""
    base = os.environ.get("STARPU_PERF_MODEL_DIR")
    if base is None:
        home = os.environ.get("STARPU_HOME") or os.path.expanduser("~")
        base = os.path.join(home, ".starpu", "sampling")
    return Path(base) / "codelets" / "45"


def history(directory=None, hostname: str | None = None) -> pd.DataFrame:
    """Every entry of the history models StarPU saved for this host's codelets
    (``nl_<op>.<host>``; host: ``$STARPU_HOSTNAME`` or this machine's name), one row per
    (op, arch, device, footprint) with samples: ``ENTRY_COLUMNS`` and ``flops`` (NaN where
    the tasks carried none). A file that cannot be parsed is left out."""
    directory = Path(directory) if directory is not None else model_dir()
    host = hostname or os.environ.get("STARPU_HOSTNAME") or socket.gethostname()
    rows = []
    for path in sorted(directory.glob(f"{SYMBOL_PREFIX}*.{host}")):
        op = path.name[len(SYMBOL_PREFIX):-len(host) - 1]
        try:
            rows += [{"op": op, **e} for e in _parse(path.read_text())]
        except (OSError, ValueError, IndexError):
            continue        # a file StarPU was writing, or of another version
    cols = [*ENTRY_COLUMNS, "flops"]
    out = pd.DataFrame(rows, columns=cols)
    return out[out["nsample"] > 0].reset_index(drop=True) if len(out) else out


def _parse(text: str) -> list[dict]:
    """The single-device entries of one model file (StarPU 1.3, version 45)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out: list[dict] = []
    devices, arch, devid, i = 0, None, 0, 0

    def value_after(k: int) -> str:   # the first line after k that is not a comment
        k += 1
        while lines[k].startswith("#"):
            k += 1
        return lines[k]
    while i < len(lines):
        line = lines[i]
        if line.startswith("# number of types devices"):
            devices = int(value_after(i))
        elif line.startswith("# device type"):
            arch = FILE_ARCH.get(int(value_after(i)), "other")
        elif line.startswith("# device id"):
            devid = int(value_after(i))
        elif line.startswith("# number of entries"):
            n = int(value_after(i))
            while not lines[i].startswith("# hash"):
                i += 1
            for entry in lines[i + 1:i + 1 + n]:
                h, size, flops, mean, dev, _, _, count = entry.split()[:8]
                if devices == 1:
                    out.append({"arch": arch, "devid": devid, "footprint": int(h, 16),
                                "size_bytes": int(size), "flops": _float(flops),
                                "mean_us": float(mean), "std_us": float(dev),
                                "nsample": int(count)})
            i += n
        i += 1
    return out


def _float(text: str) -> float:
    v = float(text)
    return v if math.isfinite(v) else math.nan
