"""The parts of scripts/gpu_check.sh (issue 32): nntile_lab checked and measured on an NVIDIA
GPU, one part per process, each writing one JSON record as it goes.

    python3 scripts/gpu_check.py env --out DIR          # the machine (no nntile_lab needed)
    python3 scripts/gpu_check.py ready --out DIR        # the build loads, CUDA workers start
    python3 scripts/gpu_check.py part a|b|c|d|e|f --out DIR
    python3 scripts/gpu_check.py stopped PART RC SECONDS --out DIR   # killed, crashed, not run
    python3 scripts/gpu_check.py summary --out DIR      # the table; exit 1 if a part failed

Parts: (a) every CUDA kernel against the C kernel (the ``cuda`` tests), (b) GPT-2 steps on
CPU-only, GPU-only and mixed runtimes give equal losses, (c) CuPy interop without a host copy,
(d) the GPU's memory capped below the model (``cuda_memory_limit_mb``): equal losses, tiles
moving between the GPU and RAM in the trace, (e) a GPT-2 step's throughput against PyTorch
(eager, torch.compile; fp32, bf16) at two sizes that fit and one that fits only with RAM as
the overflow, (f) the schedulers dmda, dmdas, heteroprio and lws on CPU + GPU workers.

``NL_GPU_CHECK_EMULATE=1`` (gpu_check.sh --emulate): the same logic on a machine without a
GPU, the accelerator being the OpenCL worker (PoCL's device on the CPU: its own memory node
and cap) at toy sizes, part (a) the host emulation of the CUDA kernels, part (c) not run (no
CuPy, no CUDA), PyTorch on the CPU. tests/scripts/test_gpu_check.py runs it; CI does.

Each record: part, title, status (PASS, FAIL, SKIP, RUNNING while it runs), seconds,
checks (name, ok, detail), numbers, error. It is rewritten atomically after every step, so
a part stopped by its time budget keeps what it measured (``stopped`` marks it FAIL).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLES = {"a": "CUDA kernels against the C kernels",
          "b": "GPT-2 losses: CPU-only, GPU-only, mixed",
          "c": "CuPy interop without a host copy",
          "d": "GPU memory capped below the model: RAM as overflow",
          "e": "GPT-2 step throughput against PyTorch",
          "f": "schedulers on CPU + GPU workers"}
PARTS = tuple(TITLES)
# Loss agreement between runtimes: float32 sums in another order (cuBLAS's blocking, the
# GPU's reductions, another worker's tile) differ by ~1e-6 relative per op; AdamW's first
# updates are ~lr·sign(g), so a rounding-level gradient can move a parameter by lr: after
# three steps the losses agree to ~1e-5. 1e-4 leaves room for that, and the losses must
# change by ≥ 10× it from step to step (LOSS_MOVES), so a run that did nothing fails.
LOSS_RTOL = 1e-4
LOSS_MOVES = 10 * LOSS_RTOL
MIB = 1 << 20
# part (e)'s measurements, in groups run in this order (NL_GPU_CHECK_E_PLAN, gpu_check.sh
# --e-plan, takes a subset): S1 and S2 for both systems and precisions; S3 under the cap;
# one traced nntile_lab step at S1 per precision (where its time goes); torch.compile at S1
E_GROUPS = ("fits", "overflow", "trace", "compile")
NOT_STARTED = 125   # ``stopped``'s code for a part gpu_check.sh left out for want of time


def emulated() -> bool:
    return os.environ.get("NL_GPU_CHECK_EMULATE") == "1"


def kind() -> str:
    """The accelerator the parts run on: "cuda", or "opencl" in emulation."""
    return "opencl" if emulated() else "cuda"


def ncpu_default() -> int:
    """CPU workers beside one accelerator worker: every core but one for StarPU's CUDA
    driver thread and one for Python (which submits the tasks); 1 in emulation."""
    if emulated():
        return 1
    return max(1, min(len(os.sched_getaffinity(0)) - 2, 30))


def accel_kwargs(cap_mb: int | None = None) -> dict:
    """Runtime keywords for one accelerator worker, capped at ``cap_mb`` MiB."""
    if kind() == "cuda":
        return {"ncuda": 1, "cuda_memory_limit_mb": cap_mb}
    return {"nopencl": 1, "opencl_memory_limit_mb": cap_mb}


# ---- records ---------------------------------------------------------------------------
def write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=_jsonable)
    os.replace(tmp, path)


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


class Record:
    """One part's JSON record, saved after every change."""

    def __init__(self, out: str, part: str):
        self.path = os.path.join(out, f"part_{part}.json")
        self.t0 = time.perf_counter()
        self.data = {"part": part, "title": TITLES[part], "status": "RUNNING",
                     "accelerator": kind(), "emulated": emulated(), "seconds": 0.0,
                     "checks": [], "numbers": {}, "error": None}
        self.save()

    def save(self) -> None:
        self.data["seconds"] = round(time.perf_counter() - self.t0, 2)
        write_json(self.path, self.data)

    def number(self, key: str, value) -> None:
        self.data["numbers"][key] = value
        self.save()

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.data["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}", flush=True)
        self.save()
        return bool(ok)

    def finish(self, status: str | None = None, error: str | None = None) -> None:
        checks = self.data["checks"]
        if status is None:
            status = "PASS" if checks and all(c["ok"] for c in checks) and not error else "FAIL"
        self.data["status"], self.data["error"] = status, error
        self.save()


def rel_diff(a, b) -> float:
    """max |a - b| / |b| over a sequence of losses."""
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


# ---- the environment -----------------------------------------------------------------
def _cmd(args, timeout=20) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return (done.stdout + done.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc.__class__.__name__}: {exc})"


def environment() -> dict:
    """What the machine is (printed first, so even a failed run says where it ran)."""
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                   "")
    mem = ""
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        mem = f.readline().split(":", 1)[1].strip()
    env = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "hostname": platform.node(), "kernel": platform.release(),
           "machine": platform.machine(), "cpu": cpu, "cores": os.cpu_count(),
           "affinity": len(os.sched_getaffinity(0)), "memtotal": mem,
           "python": sys.version.split()[0], "python_exe": sys.executable,
           "glibc": " ".join(platform.libc_ver()),
           "gcc": _cmd(["gcc", "--version"]).splitlines()[0:1],
           "nvcc": _cmd(["nvcc", "--version"]).splitlines()[-2:],
           "nvidia_smi": _cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                               "clocks.max.sm,power.limit", "--format=csv,noheader"]),
           "nvidia_smi_cuda": next((ln.strip() for ln in _cmd(["nvidia-smi"]).splitlines()
                                    if "CUDA Version" in ln), ""),
           "emulated": emulated(), "accelerator": kind(),
           "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
           "starpu_home": os.environ.get("STARPU_HOME", "")}
    for mod in ("numpy", "torch", "cupy", "cffi"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as exc:   # noqa: BLE001 - a missing package is a reading, not an error
            env[mod] = f"not importable ({exc.__class__.__name__})"
    return env


def cmd_env(out: str) -> int:
    env = environment()
    write_json(os.path.join(out, "env.json"), env)
    for k, v in env.items():
        print(f"  {k:16s} {v}")
    return 0


def cmd_ready(out: str) -> int:
    """The build loads and one runtime with the accelerator starts and stops (StarPU's bus
    calibration, once, into $STARPU_HOME: the parts then start in a second)."""
    import nntile_lab as nl
    from nntile_lab._lib import EXT_FILE, VARIANT, lib
    from nntile_lab.runtime import cuda_devices, opencl_devices
    info = {"ext_file": EXT_FILE, "variant": VARIANT, "cuda_built": bool(lib.nl_cuda_built()),
            "cuda_devices": cuda_devices(), "opencl_devices": opencl_devices(),
            "maxcpus": int(lib.STARPU_MAXCPUS), "ncpu": ncpu_default()}
    t0 = time.perf_counter()
    ok = True
    try:
        with nl.Runtime(scheduler="dmda", ncpu=ncpu_default(), **accel_kwargs()) as rt:
            info["workers"] = rt.nworkers
            info["device_memory_mb"] = rt.device_memory_bytes() // MIB
    except Exception as exc:   # noqa: BLE001 - said and recorded: the parts will fail too
        info["error"] = f"{exc.__class__.__name__}: {exc}"
        ok = False
    info["first_start_s"] = round(time.perf_counter() - t0, 2)
    if kind() == "cuda" and not info["cuda_built"]:
        info["error"], ok = "nntile_lab was built against a StarPU without CUDA", False
    write_json(os.path.join(out, "ready.json"), info)
    for k, v in info.items():
        print(f"  {k:16s} {v}")
    return 0 if ok else 1


# ---- (a) the kernels --------------------------------------------------------------------
def part_a(rec: Record) -> None:
    """The CUDA tests on the GPU (pytest -m cuda), or the host emulation of the kernels."""
    if emulated():
        files = ["tests/kernels/test_cuda_emulated.py"]
        marker = []
    else:
        files = ["tests/ops/test_cuda.py", "tests/runtime/test_cuda.py",
                 "tests/tensor/test_cupy.py"]
        marker = ["-m", "cuda or not cuda"]
    junit = os.path.join(os.path.dirname(rec.path), "a_junit.xml")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *marker,
           f"--junitxml={junit}", *files]
    rec.number("command", " ".join(cmd[1:]))
    rec.number("examples_per_test", int(os.environ.get("NNTILE_LAB_EXAMPLES", "25")))
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = (done.stdout + done.stderr)[-3000:]
    print(tail, flush=True)
    counts, failed = _junit(junit)
    rec.number("tests", counts)
    rec.number("failed_tests", failed[:40])
    rec.check("tests ran", counts["tests"] > 0, f"{counts['tests']} tests in {len(files)} files")
    rec.check("none failed", counts["failures"] + counts["errors"] == 0 and done.returncode == 0,
              f"{counts['failures']} failures, {counts['errors']} errors, pytest exit "
              f"{done.returncode}" + (f"; first: {failed[0]}" if failed else ""))
    rec.check("none skipped", counts["skipped"] == 0, f"{counts['skipped']} skipped")


def _junit(path: str) -> tuple[dict, list]:
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed = []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts, failed
    for suite in root.iter("testsuite"):
        for k in counts:
            counts[k] += int(suite.get(k, 0))
    for case in root.iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            msg = (bad.get("message") or "").splitlines()[0:1]
            failed.append(f"{case.get('classname')}::{case.get('name')}: "
                          f"{msg[0][:200] if msg else ''}")
    return counts, failed


# ---- GPT-2 runs (b, d) -------------------------------------------------------------------
def small_spec(**kw):
    """The GPT-2 of parts (b) and (f): several tiles along every dimension, so a mixed
    runtime has choices, and small enough for the CPU-only run."""
    from nntile_lab.spec import ExperimentSpec
    if emulated():
        base = dict(n_layer=1, n_head=2, n_embd=32, vocab_size=256, seq_len=16, batch=4,
                    batch_tile=2, seq_tile=16, embd_tile=16, inner_tile=64, head_tile=1,
                    vocab_tile=128)
    else:
        base = dict(n_layer=2, n_head=8, n_embd=512, vocab_size=8192, seq_len=256, batch=8,
                    batch_tile=4, seq_tile=256, embd_tile=256, inner_tile=1024, head_tile=4,
                    vocab_tile=2048)
    return ExperimentSpec(**(base | dict(lr=3e-3, clip=1.0, seed=1) | kw))


def gpt2_run(spec, runtime_kw: dict, where: str | None, steps: int = 3, trace: bool = True,
             warmup: int = 0) -> dict:
    """``steps`` AdamW steps of ``spec``'s GPT-2 on one fixed batch (the same in every run),
    the tasks confined to ``where`` (with fallback to the CPU; None: the scheduler's
    choice): losses, step times, and from a trace of the steps where the tasks ran and the
    bytes each bus moved."""
    import numpy as np

    import nntile_lab as nl
    from nntile_lab.optim import AdamW
    from nntile_lab.trace.placement import arch_of
    from nntile_lab.trace.recorder import Trace
    # one batch, every step: the model learns it, so the loss falls step by step (random
    # batches leave it at ~ln V, where a run that did nothing would look the same)
    ids = np.random.default_rng(spec.seed).integers(0, spec.vocab_size,
                                                    (spec.batch, spec.seq_len + 1))
    batches = [ids] * (warmup + steps)
    out = {"runtime": {k: v for k, v in runtime_kw.items() if v is not None}, "where": where}
    t0 = time.perf_counter()
    with nl.Runtime(**runtime_kw) as rt:
        model = nl.GPT2(spec.gpt2_config(), seed=spec.seed, precision=spec.precision)
        opt = AdamW(model, lr=spec.lr, weight_decay=0.1)
        rt.wait()
        out["init_s"] = time.perf_counter() - t0
        place = rt.on(where, fallback="cpu") if where else contextlib.nullcontext()
        losses, times = [], []
        tr = Trace(rt) if trace else None
        with place:
            for k, ids in enumerate(batches):
                if k == warmup and tr is not None:
                    tr.start()
                t = time.perf_counter()
                loss = model.forward_backward(ids[:, :-1], ids[:, 1:])
                opt.step(clip_norm=spec.clip)
                rt.wait()
                if k >= warmup:
                    times.append(time.perf_counter() - t)
                    losses.append(loss)
        if tr is not None:
            tr.stop()
        if rt.device_kind:
            out["device_capacity_mb"] = rt.device_memory_bytes() / MIB
        model.free()
    out["losses"], out["step_s"] = losses, times
    if tr is not None:
        arch = [arch_of(n) for n in tr.tasks["worker_name"]]
        out["tasks"] = len(arch)
        out["tasks_by_arch"] = {a: arch.count(a) for a in sorted(set(arch))}
        out["buses"] = [{"src": r.src, "dst": r.dst, "bytes": int(r.bytes),
                         "transfers": int(r.transfers)} for r in tr.buses.itertuples()
                        if r.bytes > 0]
        mem = tr.memory
        dev = mem[mem["name"].astype(str).str.startswith(("CUDA", "OpenCL"))]
        out["device_peak_used_mb"] = (float(dev["used_bytes"].max()) / MIB if len(dev)
                                      else None)
    return out


def device_share(run: dict) -> float:
    n = run.get("tasks") or 0
    return run.get("tasks_by_arch", {}).get(kind(), 0) / n if n else 0.0


def bus_bytes(run: dict, src: str, dst: str) -> int:
    """Bytes moved from memory nodes named ``src*`` to ``dst*`` ("NUMA", "CUDA", "OpenCL")."""
    return sum(b["bytes"] for b in run.get("buses", [])
               if b["src"].startswith(src) and b["dst"].startswith(dst))


def _loss_checks(rec: Record, runs: dict, reference: str) -> None:
    ref = runs[reference]["losses"]
    moves = min((abs(a - b) / abs(b) for a, b in zip(ref[1:], ref)), default=0.0)
    rec.check("the losses move from step to step", moves >= LOSS_MOVES,
              f"smallest relative change {moves:.2e} (≥ {LOSS_MOVES:g}: a run that did "
              "nothing would fail the comparison)")
    for name, run in runs.items():
        if name == reference:
            continue
        d = rel_diff(run["losses"], ref)
        rec.check(f"{name} losses = {reference} losses", d <= LOSS_RTOL,
                  f"max relative difference {d:.2e} (tolerance {LOSS_RTOL:g}); "
                  f"{name} {[f'{x:.6f}' for x in run['losses']]}, "
                  f"{reference} {[f'{x:.6f}' for x in ref]}")


def part_b(rec: Record) -> None:
    spec = small_spec()
    n = ncpu_default()
    rec.number("model", _model_numbers(spec))
    runs = {}
    configs = {"cpu-only": ({"scheduler": "dmda", "ncpu": n}, None),
               "gpu-only": ({"scheduler": "dmda", "ncpu": n, **accel_kwargs()}, kind()),
               "mixed": ({"scheduler": "dmda", "ncpu": n, **accel_kwargs()}, None)}
    for name, (kw, where) in configs.items():
        runs[name] = gpt2_run(spec, kw, where)
        rec.number(name, runs[name])
    _loss_checks(rec, runs, "cpu-only")
    share = device_share(runs["gpu-only"])
    rec.check("gpu-only ran on the accelerator", share >= 0.9,
              f"{100 * share:.1f}% of {runs['gpu-only']['tasks']} tasks on {kind()} "
              f"({runs['gpu-only']['tasks_by_arch']})")
    mixed = runs["mixed"]["tasks_by_arch"]
    rec.check("mixed used both kinds of worker", mixed.get("cpu", 0) > 0 and mixed.get(kind(), 0)
              > 0, f"tasks by kind {mixed}")


def _model_numbers(spec) -> dict:
    from nntile_lab import memory
    plan = memory.estimate(spec.replace(ncuda=0, cuda_memory_limit_mb=None, nopencl=0,
                                        opencl_memory_limit_mb=None))
    return {"n_layer": spec.n_layer, "n_embd": spec.n_embd, "n_head": spec.n_head,
            "vocab_size": spec.vocab_size, "seq_len": spec.seq_len, "batch": spec.batch,
            "precision": spec.precision,
            "tiles": {t: getattr(spec, t) for t in ("batch_tile", "seq_tile", "embd_tile",
                                                    "inner_tile", "head_tile", "vocab_tile")},
            "params": spec.num_params(), "flops_per_step": spec.flops_per_step(),
            "planned_peak_mb": plan.peak_bytes / MIB,
            "largest_task_mb": plan.largest_task_bytes / MIB}


# ---- (c) CuPy --------------------------------------------------------------------------
def part_c(rec: Record) -> None:
    if emulated():
        rec.number("why", "CuPy needs CUDA: the emulation (OpenCL on the CPU) has neither")
        rec.finish("SKIP")
        return
    import cupy
    import numpy as np

    import nntile_lab as nl
    from nntile_lab._lib import lib
    rng = np.random.default_rng(3)
    with nl.Runtime(scheduler="dmda", ncpu=ncpu_default(), ncuda=1, profiling=True) as rt:
        node = rt.cuda_memory_node()
        x = rng.standard_normal((1000, 300)).astype(np.float32)
        t = nl.from_numpy(x, (256, 300))
        with rt.on("cuda"):
            y = nl.ops.scale(t, 2.0)
        rt.wait()
        handles = [y.handles[i] for i in range(y.ntiles)]
        with y.to_cupy() as tiles:
            ptrs = [a.data.ptr for a in tiles]
            starpu = [lib.nl_tile_pointer_on_node(h, node) for h in handles]
            kinds = [getattr(cupy.cuda.runtime.pointerGetAttributes(p), "type", None)
                     for p in ptrs]
            got = cupy.asnumpy(cupy.concatenate(tiles))
        rec.check("to_cupy arrays are StarPU's GPU buffers", ptrs == starpu and all(
            k == 2 for k in kinds), f"{len(ptrs)} tiles; pointers equal to the tiles' on the "
            f"CUDA node: {ptrs == starpu}; cudaPointerAttributes.type {set(kinds)} (2: device)")
        rec.check("to_cupy values", np.array_equal(got, 2 * x), "exactly 2·x")
        with y.to_cupy(write=True) as tiles:
            for a in tiles:
                a += 1
        rec.check("to_cupy(write=True) writes the tiles",
                  np.array_equal(y.to_numpy(), 2 * x + 1), "exactly 2·x + 1 read back")
        # from_cupy of 1 GiB: the copy runs on the GPU (no bytes GPU → RAM), at device speed
        big = cupy.random.default_rng(4).standard_normal((16384, 16384), dtype=cupy.float32)
        cupy.cuda.runtime.deviceSynchronize()
        rt.bus_traffic()   # reset the counters
        t0 = time.perf_counter()
        z = nl.from_cupy(big, (4096, 4096))
        rt.wait()
        secs = time.perf_counter() - t0
        moved = rt.bus_traffic()
        to_ram = sum(b["bytes"] for b in moved if b["dst"].startswith("NUMA"))
        on_gpu = all(lib.starpu_data_is_on_node(z.handles[i], node) for i in range(z.ntiles))
        rec.number("from_cupy_1GiB", {"seconds": secs, "GB_per_s": big.nbytes / secs / 1e9,
                                      "bus": moved})
        rec.check("from_cupy copies on the GPU", to_ram == 0 and on_gpu,
                  f"{big.nbytes / 2**30:.0f} GiB in {secs * 1e3:.1f} ms "
                  f"({big.nbytes / secs / 1e9:.0f} GB/s), {to_ram} bytes to RAM, tiles on "
                  f"the CUDA node: {on_gpu}")
        sample = cupy.asnumpy(big[::4096, ::4096])
        back = z.to_numpy()[::4096, ::4096]
        rec.check("from_cupy values", np.array_equal(back, sample), "corner of every tile")


# ---- (d) the capped GPU ------------------------------------------------------------------
def capped_spec():
    """A GPT-2 whose training step needs several times the cap (parameters, gradients,
    AdamW's moments and activations), its tasks each well under half the cap."""
    if emulated():
        return small_spec(n_layer=2, n_embd=256, vocab_size=4096, seq_len=64, batch=8,
                          batch_tile=2, seq_tile=64, embd_tile=128, inner_tile=256,
                          head_tile=1, vocab_tile=1024), 16
    return small_spec(n_layer=4, n_embd=1024, n_head=16, vocab_size=16384, seq_len=256,
                      batch=8, batch_tile=2, seq_tile=256, embd_tile=512, inner_tile=1024,
                      head_tile=8, vocab_tile=4096), 256


def part_d(rec: Record) -> None:
    spec, cap = capped_spec()
    model = _model_numbers(spec)
    rec.number("model", model)
    rec.number("cap_mb", cap)
    rec.check("the step needs more than the cap", model["planned_peak_mb"] > 2 * cap,
              f"planned peak {model['planned_peak_mb']:.0f} MiB, cap {cap} MiB")
    n = ncpu_default()
    runs = {"cpu-only": gpt2_run(spec, {"scheduler": "dmda", "ncpu": n}, None, trace=False)}
    rec.number("cpu-only", runs["cpu-only"])
    runs["gpu capped"] = gpt2_run(spec, {"scheduler": "dmda", "ncpu": n, **accel_kwargs(cap)},
                                  kind())
    rec.number("gpu capped", runs["gpu capped"])
    if not emulated():   # the same on the whole GPU: what the overflow costs
        runs["gpu uncapped"] = gpt2_run(spec, {"scheduler": "dmda", "ncpu": n,
                                               **accel_kwargs()}, kind())
        rec.number("gpu uncapped", runs["gpu uncapped"])
    _loss_checks(rec, runs, "cpu-only")
    capped = runs["gpu capped"]
    dev = "CUDA" if kind() == "cuda" else "OpenCL"
    down, up = bus_bytes(capped, dev, "NUMA"), bus_bytes(capped, "NUMA", dev)
    rec.check("tiles went back to RAM (evictions) and came again", down > 0 and up > cap * MIB,
              f"{up / MIB:.0f} MiB RAM → {dev}, {down / MIB:.0f} MiB {dev} → RAM over "
              f"{len(capped['losses'])} steps")
    peak = capped.get("device_peak_used_mb")
    rec.check("the GPU held at most the cap", peak is not None and peak <= cap,
              f"peak used on the device {peak} MiB (StarPU's accounting), cap {cap} MiB; "
              f"device capacity {capped.get('device_capacity_mb')} MiB")
    rec.check("ran on the accelerator", device_share(capped) >= 0.9,
              f"{100 * device_share(capped):.1f}% of tasks ({capped['tasks_by_arch']})")


# ---- (e) throughput ----------------------------------------------------------------------
def sizes() -> dict:
    """name → (spec, cap_mb or None); the tiles are the whole dimension where the GPU takes
    it (fewest tasks), smaller under a cap (each task a few percent of it)."""
    from nntile_lab.spec import ExperimentSpec
    if emulated():
        common = dict(vocab_size=512, seq_len=32, batch=4, lr=1e-4, clip=1.0,
                      warmup_steps=1, measure_steps=2)
        over = ExperimentSpec(n_layer=2, n_head=2, n_embd=256, batch_tile=2, vocab_tile=1024,
                              inner_tile=256, embd_tile=128,
                              **common | {"vocab_size": 4096, "seq_len": 64, "batch": 8})
        return {"S1": (ExperimentSpec(n_layer=1, n_head=2, n_embd=64, **common), None),
                "S2": (ExperimentSpec(n_layer=2, n_head=2, n_embd=64, **common), None),
                "S3-overflow": (over, 16)}
    common = dict(vocab_size=50257, seq_len=1024, batch=8, lr=1e-4, clip=1.0,
                  warmup_steps=1, measure_steps=3)

    def whole(layers, heads, embd):
        return ExperimentSpec(n_layer=layers, n_head=heads, n_embd=embd, batch_tile=8,
                              seq_tile=1024, embd_tile=embd, inner_tile=4 * embd,
                              head_tile=heads, vocab_tile=50257, **common)
    # S2's model under a 16 GiB cap (an emulated small GPU; PyTorch's S2 step needs 21 GB,
    # measured on the H200): smaller tiles, so that a task takes a few percent of the cap
    # and StarPU can evict around it
    over = whole(24, 16, 1024).replace(batch_tile=1, inner_tile=2048, head_tile=8,
                                       vocab_tile=8192, measure_steps=2)
    return {"S1 GPT-2 small": (whole(12, 12, 768), None),
            "S2 GPT-2 medium": (whole(24, 16, 1024), None),
            "S3 GPT-2 medium, 16 GiB cap": (over, 16384)}


def nntile_step_times(spec, cap_mb: int | None, trace: bool = False) -> dict:
    """The trainer's step (experiment.step_function) confined to the accelerator, with the
    CPU as the fallback; ``spec.warmup_steps`` untimed steps, then ``measure_steps``.
    ``trace``: one more step, traced: where its time went, per op and kind of worker."""
    import nntile_lab as nl
    from nntile_lab import experiment
    t0 = time.perf_counter()
    kw = dict(scheduler="dmda", ncpu=min(4, ncpu_default()), **accel_kwargs(cap_mb))
    with nl.Runtime(**kw) as rt:
        model, opt, schedule = experiment.build(spec)
        rt.wait()
        init = time.perf_counter() - t0
        # progress on stderr: a measurement stopped by its budget says how far it got
        print(f"init {init:.1f} s", file=sys.stderr, flush=True)
        trainer_step = experiment.step_function(spec, rt, model, opt, schedule,
                                                experiment.RandomTokens(spec.vocab_size))

        def step(k):
            t = time.perf_counter()
            trainer_step(k)
            print(f"step {k} {time.perf_counter() - t:.2f} s", file=sys.stderr, flush=True)
        with rt.on(kind(), fallback="cpu"):
            times = experiment.timed_steps(step, spec.warmup_steps, spec.measure_steps)
            where = _traced_step(rt, step, spec.warmup_steps + spec.measure_steps) if trace \
                else None
        model.free()
    out = _timing(spec, times) | {"init_s": init, "runtime": kw}
    return out | ({"trace": where} if where else {})


def _traced_step(rt, step, k: int) -> dict:
    """Step ``k`` under a trace: its wall time, each kind of worker's busy time, and the ops
    that took the most kernel time (per op and kind: tasks, total ms, GFLOP/s)."""
    from nntile_lab.trace import placement
    from nntile_lab.trace.recorder import Trace
    t0 = time.perf_counter()
    with Trace(rt) as tr:
        step(k)
    wall = time.perf_counter() - t0
    tab = placement.table(tr).sort_values("total_us", ascending=False)
    busy = tab.groupby("arch")["total_us"].sum() / 1e3
    return {"wall_ms": wall * 1e3, "busy_ms_by_arch": busy.to_dict(),
            "tasks": len(tr.tasks), "top_ops": [
                {"op": r.op, "arch": r.arch, "tasks": int(r.tasks),
                 "total_ms": r.total_us / 1e3, "mean_us": r.mean_us,
                 "gflops": None if r.gflops != r.gflops else r.gflops}
                for r in tab.head(16).itertuples()]}


def _timing(spec, times: list[float]) -> dict:
    med = statistics.median(times)
    flops = spec.flops_per_step()
    return {"step_s": med, "step_min_s": min(times), "step_max_s": max(times),
            "step_times_s": times, "tflops": flops / med / 1e12,
            "tokens_per_s": spec.batch * spec.seq_len / med}


def torch_step_times(spec, precision: str, compile: bool = False,
                     cap_mb: int | None = None) -> dict:
    """nanoGPT's model (reference/nanogpt.py) on the GPU, fused AdamW, gradient clipping at
    spec.clip, bf16 autocast for ``bf16``; PyTorch's own init drawn on the GPU (the values
    do not change the time). ``cap_mb``: the process may allocate at most that much
    (torch.cuda.set_per_process_memory_fraction): the same small GPU nntile_lab gets.
    In emulation: the CPU, and no cap (PyTorch cannot limit its CPU memory)."""
    import torch

    from nntile_lab.reference.nanogpt import NanoGPT

    class Model(NanoGPT):
        def init_weights(self, seed):   # PyTorch's default init, where the model lives
            pass

    dev = torch.device("cpu" if emulated() else "cuda")
    out = {"device": str(dev), "precision": precision, "compile": compile,
           "tf32": bool(torch.backends.cuda.matmul.allow_tf32), "torch": torch.__version__}
    if cap_mb is not None and dev.type == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(cap_mb * MIB / total)
        out["memory_fraction"] = cap_mb * MIB / total
    model = opt = fwd = None
    try:
        torch.manual_seed(spec.seed)
        with dev:
            model = Model(spec.gpt2_config(), dtype=torch.float32)
            opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95),
                                    weight_decay=0.1, fused=dev.type == "cuda")
            data = torch.randint(0, spec.vocab_size, (spec.warmup_steps + spec.measure_steps
                                                      + 1, spec.batch, spec.seq_len + 1))
        fwd = torch.compile(model.loss_tensor) if compile else model.loss_tensor
        amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16")

        def step(i):
            model.zero_grad(set_to_none=True)
            with amp:
                loss = fwd(data[i, :, :-1], data[i, :, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip, foreach=True)
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()

        t0 = time.perf_counter()
        step(0)
        first = time.perf_counter() - t0
        from nntile_lab.experiment import timed_steps
        times = timed_steps(step, spec.warmup_steps, spec.measure_steps, first=1)
        out |= _timing(spec, times)
        out["first_step_s"] = first
        if compile:
            out["compile_s"] = max(first - out["step_s"], 0.0)
        if dev.type == "cuda":
            out["peak_allocated_mb"] = torch.cuda.max_memory_allocated() / MIB
    except torch.OutOfMemoryError as exc:
        out["oom"] = True
        out["error"] = str(exc).splitlines()[0][:300]
    finally:
        model = opt = fwd = None   # the memory back before the cap is lifted
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            if cap_mb is not None:
                torch.cuda.set_per_process_memory_fraction(1.0)
    return out


def matmul_peaks() -> dict:
    """The GPU's measured matrix rates (8192³ products, median of 10 after warm-up), the
    ceilings MFU is read against: fp32 (no TF32, as both systems run it) and bf16."""
    import torch
    if emulated():
        return {}
    out = {}
    n = 8192
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        for _ in range(3):
            a @ b
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ b
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        out[f"{name}_tflops"] = 2 * n ** 3 / statistics.median(times) / 1e12
        del a, b
    torch.cuda.empty_cache()
    return out


def part_e(rec: Record) -> None:
    """Each measurement in its own process (``measure``): a crash or an OOM costs that
    measurement only, and PyTorch's allocator never holds memory a later nntile_lab run
    needs. torch.compile (about a minute per model and precision) runs at S1 only, last:
    bf16 first, PyTorch's strongest mode."""
    table = sizes()
    names = list(table)
    groups = {"fits": [], "overflow": [("nntile", names[2], "fp32", False),
                                       ("torch", names[2], "fp32", False)],
              "trace": [("trace", names[0], "fp32", False), ("trace", names[0], "bf16", False)],
              "compile": [] if emulated() else [("torch", names[0], "bf16", True),
                                                ("torch", names[0], "fp32", True)]}
    for name in names[:2]:
        for prec in ("fp32", "bf16"):
            groups["fits"] += [("nntile", name, prec, False), ("torch", name, prec, False)]
    chosen = os.environ.get("NL_GPU_CHECK_E_PLAN", ",".join(E_GROUPS)).split(",")
    bad = [g for g in chosen if g not in groups]
    if bad:
        raise ValueError(f"NL_GPU_CHECK_E_PLAN (--e-plan): {bad} unknown; groups: "
                         f"{', '.join(E_GROUPS)}")
    rec.number("plan", chosen)
    plan = [m for g in chosen for m in groups[g]]
    rec.number("models", {n: _model_numbers(s) | {"cap_mb": c} for n, (s, c) in table.items()})
    if not emulated() and "fits" in chosen:
        rec.number("matmul_peaks", _in_process("peaks", "", "", False, 120))
    results = []
    for system, name, prec, comp in plan:
        budget = 180 if comp else 150
        r = _in_process(system, name, prec, comp, budget)
        r |= {"system": system, "size": name, "precision": prec, "compile": comp}
        results.append(r)
        rec.number("results", results)
        if system == "trace" and "trace" in r:
            busy = ", ".join(f"{a} {ms:.0f} ms" for a, ms in r["trace"]["busy_ms_by_arch"].items())
            print(f"  traced {name} {prec}: step {r['trace']['wall_ms']:.0f} ms, busy {busy}; "
                  "top: " + "; ".join(f"{o['op']}@{o['arch']} {o['total_ms']:.0f} ms"
                                      for o in r["trace"]["top_ops"][:6]), flush=True)
            continue
        print(f"  {system:6s} {name:24s} {prec} {'compiled' if comp else 'eager':8s} "
              + (f"{r['step_s'] * 1e3:9.1f} ms  {r['tflops']:7.2f} TFLOP/s" if "step_s" in r
                 else f"{'OOM' if r.get('oom') else 'failed'}: {r.get('error', '')[:120]}"),
              flush=True)
    ratios = {}
    for name in names:
        for prec in ("fp32", "bf16"):
            ours = _pick(results, "nntile", name, prec)
            theirs = [r for r in results if r["system"] == "torch" and r["size"] == name
                      and r["precision"] == prec and "step_s" in r]
            if ours and theirs:
                best = min(theirs, key=lambda r: r["step_s"])
                ratios[f"{name} {prec}"] = {
                    "nntile_over_torch_throughput": best["step_s"] / ours["step_s"],
                    "torch_mode": "compiled" if best["compile"] else "eager"}
    rec.number("ratios", ratios)
    for name in names[:2] if "fits" in chosen else []:
        r = _pick(results, "nntile", name, "fp32")
        rec.check(f"nntile_lab step at {name} (fp32)", r is not None,
                  f"{r['step_s'] * 1e3:.1f} ms, {r['tflops']:.2f} TFLOP/s" if r else
                  _why(results, "nntile", name, "fp32"))
        r = _pick(results, "nntile", name, "bf16")
        rec.check(f"nntile_lab step at {name} (bf16)", r is not None,
                  f"{r['step_s'] * 1e3:.1f} ms, {r['tflops']:.2f} TFLOP/s" if r else
                  _why(results, "nntile", name, "bf16"))
    over = names[2]
    r = _pick(results, "nntile", over, "fp32")
    if "overflow" in chosen:
        rec.check(f"nntile_lab step at {over} under the cap", r is not None,
                  f"{r['step_s'] * 1e3:.1f} ms, {r['tflops']:.2f} TFLOP/s" if r
                  else _why(results, "nntile", over, "fp32"))
    t = next((x for x in results if x["system"] == "torch" and x["size"] == over), None)
    if t is not None and not emulated():
        rec.number("torch_at_overflow_size", "OOM" if t.get("oom") else
                   "ran" if "step_s" in t else t.get("error"))


def _pick(results, system, size, prec):
    return next((r for r in results if r["system"] == system and r["size"] == size
                 and r["precision"] == prec and "step_s" in r and not r["compile"]), None)


def _why(results, system, size, prec) -> str:
    r = next((r for r in results if r["system"] == system and r["size"] == size
              and r["precision"] == prec), None)
    return "not run" if r is None else f"failed: {r.get('error', '?')[:300]}"


def _in_process(system: str, size: str, precision: str, compile: bool, budget: int) -> dict:
    """``measure`` in a child process with a time budget (at most what is left of the
    part's, NL_GPU_CHECK_PART_END): its JSON, or the error."""
    end = os.environ.get("NL_GPU_CHECK_PART_END")
    if end:
        budget = min(budget, int(end) - int(time.time()) - 3)
        if budget < 10:
            return {"error": "not run: the part's time budget was spent"}
    cmd = [sys.executable, os.path.abspath(__file__), "measure", system, size, precision,
           str(int(compile))]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr or b""   # bytes whatever text= says; its progress lines
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        return {"error": f"timed out after {budget} s", "progress": said[-600:]}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": f"exit {done.returncode}: {(done.stdout + done.stderr)[-600:]}"}


def cmd_measure(system: str, size: str, precision: str, compile: bool) -> int:
    try:
        if system == "peaks":
            res = matmul_peaks()
        else:
            spec, cap = sizes()[size]
            spec = spec.replace(precision=precision)
            res = (nntile_step_times(spec, cap) if system == "nntile"
                   else nntile_step_times(spec.replace(measure_steps=1), cap, trace=True)
                   if system == "trace" else torch_step_times(spec, precision, compile, cap))
    except Exception as exc:   # noqa: BLE001 - reported to the parent as this measurement's error
        res = {"error": f"{exc.__class__.__name__}: {exc}"[:600],
               "traceback": traceback.format_exc()[-1500:]}
    print(json.dumps(res, default=_jsonable), flush=True)
    return 0


# ---- (f) schedulers ----------------------------------------------------------------------
SCHEDULERS = ("dmda", "dmdas", "heteroprio", "lws")


def part_f(rec: Record) -> None:
    """Each policy on CPU + accelerator workers, free to place every task (no confinement),
    after one calibration run (STARPU_CALIBRATE=1 under dmda) so that the history models
    hold both kinds; beside them the accelerator alone (GPU-only) as the reference."""
    spec = small_spec(n_layer=4 if not emulated() else 1)
    n = ncpu_default()
    rec.number("model", _model_numbers(spec))
    os.environ["STARPU_CALIBRATE"] = "1"
    cal = gpt2_run(spec, {"scheduler": "dmda", "ncpu": n, **accel_kwargs()}, None, steps=2,
                   trace=False)
    os.environ.pop("STARPU_CALIBRATE")
    rec.number("calibration_s", sum(cal["step_s"]) + cal["init_s"])
    rows = {}
    configs = [("gpu-only (dmda)", "dmda", kind())] + [(s, s, None) for s in SCHEDULERS]
    for label, sched, where in configs:
        try:
            run = gpt2_run(spec, {"scheduler": sched, "ncpu": n, **accel_kwargs()}, where,
                           steps=3, warmup=1)
            row = {"step_ms": statistics.median(run["step_s"]) * 1e3,
                   "step_min_ms": min(run["step_s"]) * 1e3,
                   "step_max_ms": max(run["step_s"]) * 1e3,
                   "device_task_share": device_share(run), "tasks_by_arch": run["tasks_by_arch"],
                   "losses": run["losses"]}
        except Exception as exc:   # noqa: BLE001 - one policy failing is that row's result
            row = {"error": f"{exc.__class__.__name__}: {exc}"[:400]}
        rows[label] = row
        rec.number("schedulers", rows)
        said = (f"{row['step_ms']:9.1f} ms  {100 * row['device_task_share']:5.1f}% tasks on "
                f"{kind()}" if "step_ms" in row else row["error"])
        print(f"  {label:16s} {said}", flush=True)
    ref = rows[configs[0][0]]
    for label, _, _ in configs[1:]:
        row = rows[label]
        ok = "step_ms" in row and "losses" in ref and rel_diff(row["losses"], ref["losses"]) \
            <= LOSS_RTOL
        rec.check(f"{label} ran, losses = gpu-only's", ok,
                  f"{row['step_ms']:.1f} ms/step, {100 * row['device_task_share']:.1f}% of tasks "
                  f"on {kind()}" if "step_ms" in row else row.get("error", ""))


# ---- the driver ------------------------------------------------------------------------
def run_part(part: str, out: str) -> int:
    rec = Record(out, part)
    print(f"== part ({part}) {TITLES[part]}  [{kind()}{', emulated' if emulated() else ''}]",
          flush=True)
    try:
        globals()[f"part_{part}"](rec)
        if rec.data["status"] == "RUNNING":
            rec.finish()
    except Exception as exc:   # noqa: BLE001 - the part fails with its cause; the next runs
        traceback.print_exc()
        rec.finish("FAIL", f"{exc.__class__.__name__}: {exc}"[:1000])
    print(f"== part ({part}): {rec.data['status']} in {rec.data['seconds']:.0f} s", flush=True)
    return 0


def cmd_stopped(part: str, rc: int, seconds: float, out: str) -> int:
    """A part's process ended without finishing its record: killed by its budget (124/137)
    or crashed. Its record keeps what it measured and says why it stopped."""
    path = os.path.join(out, f"part_{part}.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {"part": part, "title": TITLES[part], "checks": [], "numbers": {},
                "accelerator": kind(), "emulated": emulated()}
    if data.get("status") not in (None, "RUNNING"):
        return 0
    why = ("not started: --deadline left it no time" if rc == NOT_STARTED
           else f"stopped by its time budget after {seconds:.0f} s" if rc in (124, 137)
           else f"its process ended with code {rc} (crash: see the log)")
    data.update(status="FAIL", error=why, seconds=seconds)
    write_json(path, data)
    return 0


def cmd_summary(out: str, parts: str) -> int:
    rows, failed = [], False
    for part in parts:
        try:
            with open(os.path.join(out, f"part_{part}.json")) as f:
                d = json.load(f)
        except (OSError, ValueError):
            d = {"status": "FAIL", "error": "no record (the part did not run)", "checks": [],
                 "seconds": 0}
        checks = d.get("checks", [])
        bad = [c for c in checks if not c["ok"]]
        first = bad[0]["name"] + ": " + bad[0]["detail"] if bad else (d.get("error") or "")
        if d.get("status") == "FAIL" and d.get("error"):
            first = d["error"] + (f" | {first}" if bad else "")
        failed |= d.get("status") not in ("PASS", "SKIP")
        rows.append({"part": part, "title": TITLES[part], "status": d.get("status"),
                     "seconds": d.get("seconds", 0), "checks_ok": len(checks) - len(bad),
                     "checks": len(checks), "note": first[:160]})
    write_json(os.path.join(out, "summary.json"), {"parts": rows, "all_passed": not failed,
                                                  "emulated": emulated(), "accelerator": kind()})
    print("\n| part | what | status | s | checks | first problem |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| ({r['part']}) | {r['title']} | {r['status']} | {r['seconds']:.0f} | "
              f"{r['checks_ok']}/{r['checks']} | {r['note']} |")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("env", "ready", "part", "stopped", "summary", "measure"))
    ap.add_argument("args", nargs="*")
    ap.add_argument("--out", default=".")
    ap.add_argument("--parts", default="".join(PARTS))
    a = ap.parse_args(argv)
    if a.command != "measure":
        os.makedirs(a.out, exist_ok=True)
    if a.command == "env":
        return cmd_env(a.out)
    if a.command == "ready":
        return cmd_ready(a.out)
    if a.command == "part":
        if len(a.args) != 1 or a.args[0] not in PARTS:
            ap.error(f"part takes one of {', '.join(PARTS)}")
        return run_part(a.args[0], a.out)
    if a.command == "stopped":
        return cmd_stopped(a.args[0], int(a.args[1]), float(a.args[2]), a.out)
    if a.command == "measure":
        return cmd_measure(a.args[0], a.args[1], a.args[2], a.args[3] == "1")
    return cmd_summary(a.out, a.parts)


if __name__ == "__main__":
    sys.exit(main())
