"""``nntile-lab bench memory``: the capacity experiment (the NNTile paper's central claim).

For the paper's 4-layer custom GPT-2 family (parameters 12·L·E² + V·E, n_inner = 4E) and
each process cap (the same for both systems):
  * the largest model PyTorch (fp32 AdamW, the project's reference model) trains with its
    peak RSS under the cap — each size in its own process, peak RSS measured;
  * the largest model nntile_lab trains out of core under it: StarPU's limit is the cap
    less the process's own RSS (``memory.starpu_limit_mb``), tiles overflow to an O_DIRECT
    disk node, and the process's measured peak RSS must stay under the cap;
  * capacity_ratio = their parameter counts' ratio;
  * nntile_lab's throughput on the models whose in-memory peak is 1×, 2× and 4× the cap,
    relative to the same model in memory, with disk bytes per step and disk bandwidth.

Every point runs in a fresh subprocess (peak RSS is per process): ``measure(spec)``.
The JSON's last line holds capacity_ratio, throughput_at_2x and the caps.

Precision (``precision`` spec field, e.g. ``kw={"precision": "bf16"}``): the experiment in
that precision for both systems — nntile_lab's mode, PyTorch's peer (bf16 autocast for bf16,
``reference.autocast``). ``run_precisions`` instead compares precisions on one model and
one RAM cap: the disk bytes each moves per step out of core, and its throughput against
the same model in memory (``bench memory --precision fp32,bf16``).
"""
from __future__ import annotations

import math
import os
import statistics
import tempfile
import time

import numpy as np

from nntile_lab import engine, experiment, memory
from nntile_lab.engine import Caps, Point
from nntile_lab.spec import DEFAULTS, HINTS, OOC_HINTS, ExperimentSpec

MIB = 1 << 20
# the paper's family at a size this machine trains: 4 layers, E = 64·k, V = 50257; E is
# tiled by 1024 so that every parameter is initialised and evicted in bands of whole tiles
BASE = dict(n_layer=4, n_head=4, vocab_size=50257, seq_len=128, batch=4, batch_tile=2,
            vocab_tile=4096, inner_tile=512, head_tile=2, warmup_steps=1, measure_steps=2)
EMBD_TILE = 1024
# E = 128 … 1024 by 64, then … 5120 by 128 (the search bisects this list)
WIDTHS = tuple(64 * k for k in range(2, 17)) + tuple(128 * k for k in range(9, 41))


def family(n_embd: int, **kw) -> ExperimentSpec:
    return ExperimentSpec(**(BASE | {"n_embd": n_embd, "embd_tile": min(EMBD_TILE, n_embd)}
                             | kw))


def measure_point(spec: ExperimentSpec, ctx=None) -> dict:
    """The engine's measurement ``memory``: train ``spec`` for warmup + measure steps in this
    process: step time (median), StarPU's peak RAM, the process's peak RSS, the disk traffic
    per measured step. With OpenCL workers (``spec.nopencl``) and the option
    ``device_first`` each op runs on the device where it has an OpenCL implementation, on
    the CPU otherwise (``Runtime.on("opencl", fallback="cpu")``), and the point adds the
    device's peak and the bytes and transfers per bus per step."""
    device_first = bool(ctx is not None and ctx.options.get("device_first"))
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import lib
    from nntile_lab.trace.recorder import drain_samples

    batches = experiment.RandomTokens(spec.vocab_size)
    peaks = {}

    def node_peaks(device):   # drained after every step: the samples of a long run stay small
        samples = drain_samples()
        for key, node in (("ram", 0), ("device", device)):   # RAM, not disk
            peaks[key] = max(peaks.get(key, 0),
                             int(samples["used"][samples["node"] == node].max(initial=0)))

    # StarPU counts bus transfers only while profiling
    with experiment.runtime(spec, profiling=bool(spec.nopencl)) as rt, \
            (rt.on("opencl", fallback="cpu") if device_first else rt.on("any")):
        device = rt.opencl_memory_node() if spec.nopencl else -2
        model, opt, schedule = experiment.build(spec)
        step = experiment.step_function(spec, rt, model, opt, schedule, batches)
        lib.nl_sampler_start(0.5)   # often enough not to miss a short peak
        try:
            for k in range(spec.warmup_steps):
                step(k)
                node_peaks(device)
            rt.disk_traffic(reset=True)
            rt.bus_traffic()   # reset
            times = []
            for k in range(spec.warmup_steps, spec.warmup_steps + spec.measure_steps):
                t0 = time.perf_counter()
                step(k)
                times.append(time.perf_counter() - t0)
                node_peaks(device)
            traffic = rt.disk_traffic()
            buses = rt.bus_traffic()
        finally:
            lib.nl_sampler_stop()
        node_peaks(device)
    n = spec.measure_steps
    disk = (traffic["bytes_read"] + traffic["bytes_written"]) / n
    t = statistics.median(times)
    out = {"step_time_s": t, "step_times_s": times, "tokens_per_s": spec.tokens_per_step() / t,
           "starpu_peak_bytes": peaks["ram"], "peak_rss_bytes": memory.peak_rss_bytes(),
           "disk_bytes_per_step": disk, "disk_read_per_step": traffic["bytes_read"] / n,
           "disk_written_per_step": traffic["bytes_written"] / n,
           "disk_bandwidth_bytes_s": disk / t if t else 0.0}
    if spec.nopencl:
        out["device_peak_bytes"] = peaks["device"]
        out["buses"] = [b | {"bytes_per_step": b["bytes"] / n,
                             "transfers_per_step": b["transfers"] / n} for b in buses]
        for direction, (src, dst) in (("ram_to_device", ("NUMA", "OpenCL")),
                                      ("device_to_ram", ("OpenCL", "NUMA"))):
            mine = [b for b in buses if b["src"].startswith(src) and b["dst"].startswith(dst)]
            out[f"{direction}_per_step"] = sum(b["bytes"] for b in mine) / n
            out[f"{direction}_transfers_per_step"] = sum(b["transfers"] for b in mine) / n
    return out


def torch_point(spec: ExperimentSpec, ctx=None) -> dict:
    """The engine's measurement ``torch-memory``: PyTorch AdamW (fp32 weights and state) on
    ``spec``'s model in this process, in the spec's precision's peer (fp32, or bf16
    autocast): step time, peak RSS."""
    # torch and the PyTorch models: optional heavy dependencies, loaded where they are used
    import torch

    from nntile_lab.reference.autocast import peer_precision
    from nntile_lab.reference.torch_gpt2 import TorchGPT2
    precision = peer_precision(spec.precision)
    torch.set_num_threads(spec.ncpu or os.cpu_count() or 1)
    model = TorchGPT2(spec.gpt2_config(), dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(0)
    times = []
    for k in range(spec.warmup_steps + spec.measure_steps):
        ids = rng.integers(0, spec.vocab_size, (spec.batch, spec.seq_len + 1))
        t0 = time.perf_counter()
        model.forward_backward(ids[:, :-1], ids[:, 1:], precision=precision)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if k >= spec.warmup_steps:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    return {"step_time_s": t, "tokens_per_s": spec.tokens_per_step() / t,
            "peak_rss_bytes": memory.peak_rss_bytes(), "precision": precision}


# bench memory's systems: the engine's measurement and its options
SYSTEMS = {"nntile": ("memory", {}), "nntile-device": ("memory", {"device_first": True}),
           "torch": ("torch-memory", {})}


def measure(spec: ExperimentSpec, system: str = "nntile", timeout: float = 1800) -> dict:
    """``measure_point`` (or ``torch_point``) of ``spec`` in a fresh process (an engine
    point), with the point's wall time including its start (``wall_s``); a point that did
    not fit, failed, was killed or timed out gives ``{"error": its reason, "status": ...}``.
    ``system`` "nntile-device": each op on the OpenCL device where it has an OpenCL
    implementation (``Runtime.on("opencl", fallback="cpu")``)."""
    name, options = SYSTEMS[system]
    t0 = time.perf_counter()
    rec = engine.run_point(Point(name, spec, options, Caps(timeout_s=timeout),
                                 kind="bench-memory-point"))
    if rec["status"] != "fits":
        return {"error": rec["reason"], "status": rec["status"]}
    return rec["results"] | {"wall_s": time.perf_counter() - t0}


def _largest(widths, fits, start: int | None = None,
             growth: float = 2.0) -> tuple[int | None, dict | None]:
    """The widest E of ``widths`` (ascending) for which ``fits(E)`` returns a result,
    assuming that fitting is monotone in the model size. From ``start`` (an index, e.g.
    the planner's guess; default the widest) it steps geometrically — each step about
    ``growth``× the parameters (E by √growth) — up while it fits or down while it does
    not, until a fit and a miss bracket the answer, then bisects between them: about
    log(range) + log2(bracket) runs, not one per width."""
    widths = sorted(widths)
    n = len(widths)
    i = n - 1 if start is None else max(0, min(n - 1, start))
    results: dict[int, dict | None] = {}

    def ok(j):
        if j not in results:
            results[j] = fits(widths[j])
        return results[j] is not None

    def step(j, up):   # the index whose width is ~√growth times (or over) widths[j]
        target = widths[j] * (growth ** 0.5 if up else growth ** -0.5)
        k = min(range(n), key=lambda m: abs(widths[m] - target))
        return max(j + 1, k) if up else min(j - 1, k)

    lo, hi = -1, n   # widths[lo] fits (or lo = -1), widths[hi] does not (or hi = n)
    if ok(i):
        lo = i
        while lo < n - 1:
            j = step(lo, True)
            j = min(j, n - 1)
            if ok(j):
                lo = j
            else:
                hi = j
                break
        else:
            hi = n
    else:
        hi = i
        while hi > 0:
            j = max(step(hi, False), 0)
            if ok(j):
                lo = j
                break
            hi = j
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return (widths[lo], results[lo]) if lo >= 0 else (None, None)


def run(caps_mb=(2048, 4096), *, ooc_dir: str | None = None, widths=WIDTHS,
        progress=print, max_width: int | None = None, speeds=(1, 2, 4), **kw) -> dict:
    """The capacity experiment for each cap; returns the table and the summary.
    ``max_width``: nntile_lab's search stops there (default the widest of ``widths``);
    ``kw``: spec fields for every point (e.g. ``hints``)."""
    ooc_dir = ooc_dir or tempfile.mkdtemp(prefix="nntile_lab_ooc_")
    rows, summary = [], {}

    def fam(e):   # the family with this run's fields
        return family(e, **kw)

    for cap in caps_mb:
        def torch_fits(e, cap=cap):
            spec = fam(e)
            if memory.estimate(spec).peak_bytes > 4 * cap * MIB:   # hopeless: skip the run
                return None
            res = measure(spec, "torch")
            ok = "error" not in res and res["peak_rss_bytes"] <= cap * MIB
            progress(f"cap {cap} MiB torch E={e}: {res}")
            rows.append({"cap_mb": cap, "system": "torch", "n_embd": e,
                         "params": spec.num_params(), **res})
            return res if ok else None

        def ooc_spec(e, cap=cap):
            spec = fam(e)
            limit = memory.starpu_limit_mb(cap, spec, ooc=True)
            return spec.replace(memory_limit_mb=limit, ooc_dir=ooc_dir,
                                ooc_size_mb=max(64, memory.estimate(spec).peak_bytes * 2 // MIB))

        def nntile_fits(e, cap=cap):
            try:
                spec = ooc_spec(e)
                memory.check(spec)
            except ValueError as exc:
                progress(f"cap {cap} MiB nntile E={e}: {exc}")
                return None
            res = measure(spec)
            ok = "error" not in res and res["peak_rss_bytes"] <= cap * MIB
            progress(f"cap {cap} MiB nntile E={e}: {res}")
            rows.append({"cap_mb": cap, "system": "nntile_ooc", "n_embd": e,
                         "params": spec.num_params(), **res})
            return res if ok else None

        # PyTorch: from the planner's guess (its in-memory RSS under the cap)
        guess = max([k for k, w in enumerate(widths)
                     if memory.estimate(fam(w)).rss_bytes <= cap * MIB] or [0])
        e_torch, _ = _largest(widths, torch_fits, start=guess)
        # nntile_lab: from the widest allowed down (out of core, it usually fits at once)
        top = [w for w in widths if (max_width is None or w <= max_width)
               and (e_torch is None or w > e_torch)] or list(widths)
        e_ooc, _ = _largest(top, nntile_fits)
        p_torch = fam(e_torch).num_params() if e_torch else 0
        p_ooc = fam(e_ooc).num_params() if e_ooc else 0
        # throughput at k× the cap: the model whose in-memory StarPU peak is nearest k·cap
        speed = {}
        for k in speeds:
            e = min(widths, key=lambda w: abs(memory.estimate(fam(w)).peak_bytes
                                              + memory.process_base_bytes() - k * cap * MIB))
            ram, ooc = measure(fam(e)), measure(ooc_spec(e))
            ratio = (ram["step_time_s"] / ooc["step_time_s"]
                     if "error" not in ram and "error" not in ooc else None)
            speed[k] = {"n_embd": e, "params": fam(e).num_params(), "in_memory": ram,
                        "out_of_core": ooc, "throughput_ratio": ratio}
            progress(f"cap {cap} MiB at {k}x: E={e} ratio {ratio}")
        summary[cap] = {"torch_largest_params": p_torch, "torch_largest_n_embd": e_torch,
                        "nntile_largest_params": p_ooc, "nntile_largest_n_embd": e_ooc,
                        "capacity_ratio": p_ooc / p_torch if p_torch else None,
                        "throughput": speed}
    first = summary[caps_mb[0]]
    return {"rows": rows, "summary": summary, "cap_mb": list(caps_mb),
            "capacity_ratio": first["capacity_ratio"],
            "throughput_at_2x": first["throughput"].get(2, {}).get("throughput_ratio")}


def report(res: dict) -> str:
    lines = []
    for cap, s in res["summary"].items():
        lines.append(f"cap {cap} MiB: PyTorch largest {s['torch_largest_params'] / 1e6:.1f} M "
                     f"(E={s['torch_largest_n_embd']}), nntile_lab out of core "
                     f"{s['nntile_largest_params'] / 1e6:.1f} M (E={s['nntile_largest_n_embd']})"
                     f", capacity ratio {_fmt(s['capacity_ratio'])}")
        for k, p in s["throughput"].items():
            ooc = p["out_of_core"]
            lines.append(f"  {k}x cap: E={p['n_embd']} throughput vs in memory "
                         f"{_fmt(p['throughput_ratio'])}, disk "
                         f"{ooc.get('disk_bytes_per_step', math.nan) / MIB:.0f} MiB/step at "
                         f"{ooc.get('disk_bandwidth_bytes_s', math.nan) / MIB:.0f} MiB/s")
    return "\n".join(lines)


# ---- the paper's setting: an accelerator's capped memory, RAM as its overflow ---------
DEVICE_SETTINGS = (("cpu", "RAM only (CPU workers)"),
                   ("device", "device, uncapped"),
                   ("device_capped", "device capped → RAM"))


def run_device(cap_mb: int = 256, multiples=(1, 2, 4), *, widths=WIDTHS, progress=print,
               **kw) -> dict:
    """For the family's models whose planned peak is nearest each multiple of ``cap_mb``:
    one row per setting (``DEVICE_SETTINGS``: CPU workers only; one OpenCL device with
    the ops that have an OpenCL implementation on it, uncapped; the same with the device
    capped at ``cap_mb``, RAM as its overflow), each in a fresh process: step time, the
    device's and RAM's peaks, bytes and transfers per step RAM → device and device → RAM.
    ``kw``: spec fields for every point. PoCL's device shares the CPU cores: the step
    times say what the mechanism costs there, nothing of a GPU's speed."""
    rows = []
    for k in multiples:
        e = min(widths, key=lambda w: abs(memory.estimate(family(w, **kw)).peak_bytes
                                          - k * cap_mb * MIB))
        base = family(e, **kw)
        specs = {"cpu": (base, "nntile"),
                 "device": (base.replace(nopencl=1), "nntile-device"),
                 "device_capped": (base.replace(nopencl=1, opencl_memory_limit_mb=cap_mb),
                                   "nntile-device")}
        plan = memory.estimate(specs["device_capped"][0])
        # the multiple the model has, not the one asked: the family's smallest member may be
        # far above a small cap (E=128 at a 16 MiB cap is 17x, once labelled "1x the cap")
        actual = plan.peak_bytes / (cap_mb * MIB)
        for setting, label in DEVICE_SETTINGS:
            spec, system = specs[setting]
            refused = setting == "device_capped" and plan.verdict == "cannot_run"
            res = {"error": plan.reason} if refused else measure(spec, system)
            row = {"multiple": k, "actual_multiple": actual, "setting": setting,
                   "label": label, "n_embd": e,
                   "params": base.num_params(), "planned_peak_bytes": plan.peak_bytes,
                   "device_cap_mb": cap_mb if setting == "device_capped" else None, **res}
            rows.append(row)
            progress(f"{_multiple(k, actual)} (E={e}), {label}: {_short_device(res)}")
    return {"cap_mb": cap_mb, "multiples": list(multiples), "rows": rows}


def _multiple(asked: int, actual: float) -> str:
    """The model's planned peak as a multiple of the cap; the one asked when they differ."""
    text = f"{actual:.1f}x the cap"
    return text if abs(actual - asked) <= 0.25 * asked else f"{text} (nearest to {asked}x)"


def report_device(res: dict) -> str:
    lines = [f"device cap {res['cap_mb']} MiB (the paper's GPU memory), RAM as its overflow; "
             "per measured step",
             f"{'model':<16}{'setting':<26}{'step s':>8}{'RAM→dev MiB':>13}{'n':>7}"
             f"{'dev→RAM MiB':>13}{'n':>7}{'dev peak':>10}{'RAM peak':>10}"]
    for r in res["rows"]:
        model = f"{r.get('actual_multiple', r['multiple']):.1f}x E={r['n_embd']}"
        if "error" in r:
            lines.append(f"{model:<16}{r['label']:<26}error: {r['error']}")
            continue
        dev = r.get("device_peak_bytes")
        lines.append(
            f"{model:<16}{r['label']:<26}{r['step_time_s']:8.2f}"
            f"{r.get('ram_to_device_per_step', 0) / MIB:13.0f}"
            f"{r.get('ram_to_device_transfers_per_step', 0):7.0f}"
            f"{r.get('device_to_ram_per_step', 0) / MIB:13.0f}"
            f"{r.get('device_to_ram_transfers_per_step', 0):7.0f}"
            f"{(dev / MIB if dev is not None else math.nan):10.0f}"
            f"{r['starpu_peak_bytes'] / MIB:10.0f}")
    return "\n".join(lines)


def _short_device(res: dict) -> str:
    if "error" in res:
        return f"error: {res['error']}"
    if "device_peak_bytes" not in res:   # the CPU workers alone: nothing moves
        return (f"step {res['step_time_s']:.2f} s, StarPU RAM peak "
                f"{res['starpu_peak_bytes'] / MIB:.0f} MiB")
    return (f"step {res['step_time_s']:.2f} s, RAM → device "
            f"{res.get('ram_to_device_per_step', 0) / MIB:.0f} MiB, device → RAM "
            f"{res.get('device_to_ram_per_step', 0) / MIB:.0f} MiB per step, device peak "
            f"{res.get('device_peak_bytes', 0) / MIB:.0f} MiB")


# ---- precisions: disk traffic and speed out of core, same model and cap -------------
def run_precisions(caps_mb=(2048,), precisions=("fp32", "bf16"), *, ooc_dir: str | None = None,
                   widths=WIDTHS, speeds=(2,), repeats: int = 1, progress=print,
                   **kw) -> dict:
    """For each cap and each multiple ``k`` of ``speeds``: the model of the family whose
    fp32 in-memory peak is nearest ``k``·cap, run out of core under the same StarPU RAM cap
    (the fp32 model's, so the cap is one number) in every precision, and in memory in every
    precision; ``repeats`` rounds, the precisions interleaved within each. Per precision:
    disk bytes read + written per step, step times in memory and out of core, and against
    the first precision (``precisions[0]``, normally fp32) the disk bytes' and out-of-core
    speed's ratios. ``kw``: spec fields for every point (not ``precision``)."""
    if "precision" in kw:
        raise ValueError("run_precisions: give the precisions as `precisions`, not a spec "
                         "field")
    if not precisions or len(set(precisions)) != len(precisions):
        raise ValueError(f"precisions={precisions!r}: give distinct precisions, e.g. "
                         "('fp32', 'bf16')")
    ooc_dir = ooc_dir or tempfile.mkdtemp(prefix="nntile_lab_ooc_")
    rows, table = [], []

    def fam(e, prec):
        return family(e, **kw, precision=prec)

    for cap in caps_mb:
        for k in speeds:
            e = min(widths, key=lambda w: abs(memory.estimate(fam(w, "fp32")).peak_bytes
                                              + memory.process_base_bytes() - k * cap * MIB))
            ref = fam(e, "fp32")
            limit = memory.starpu_limit_mb(cap, ref, ooc=True)
            size = max(64, 2 * max(memory.estimate(fam(e, p)).peak_bytes
                                   for p in precisions) // MIB)
            for r in range(repeats):
                for prec in precisions:
                    for where, spec in (("in_memory", fam(e, prec)),
                                        ("out_of_core", fam(e, prec).replace(
                                            memory_limit_mb=limit, ooc_dir=ooc_dir,
                                            ooc_size_mb=size))):
                        res = measure(spec)
                        rows.append({"cap_mb": cap, "at": k, "n_embd": e, "precision": prec,
                                     "where": where, "repeat": r, "memory_limit_mb": limit,
                                     "params": ref.num_params(), **res})
                        progress(f"cap {cap} MiB at {k}x (E={e}), {prec} {where} "
                                 f"(round {r + 1}/{repeats}): {_short(res)}")
            table += _precision_table(rows, cap, k, precisions)
    return {"rows": rows, "table": table, "caps_mb": list(caps_mb),
            "precisions": list(precisions), "speeds": list(speeds), "repeats": repeats}


def _precision_table(rows, cap, k, precisions) -> list[dict]:
    """Medians per precision of one (cap, k) and the ratios against ``precisions[0]``."""
    out = []
    for prec in precisions:
        sel = {w: [x for x in rows if (x["cap_mb"], x["at"], x["precision"], x["where"])
                   == (cap, k, prec, w) and "error" not in x]
               for w in ("in_memory", "out_of_core")}
        base = {"cap_mb": cap, "at": k, "precision": prec,
                "n_embd": next(x["n_embd"] for x in rows if x["at"] == k
                               and x["cap_mb"] == cap)}
        if not sel["out_of_core"] or not sel["in_memory"]:
            errors = [x["error"] for x in rows if (x["cap_mb"], x["at"], x["precision"]) ==
                      (cap, k, prec) and "error" in x]
            out.append(base | {"error": errors[0] if errors else "no run"})
            continue
        ooc, ram = sel["out_of_core"], sel["in_memory"]
        med = lambda xs, key: statistics.median(x[key] for x in xs)  # noqa: E731
        t_ooc = [t for x in ooc for t in x["step_times_s"]]
        row = base | {"memory_limit_mb": ooc[0]["memory_limit_mb"],
                      "disk_bytes_per_step": med(ooc, "disk_bytes_per_step"),
                      "disk_read_per_step": med(ooc, "disk_read_per_step"),
                      "disk_written_per_step": med(ooc, "disk_written_per_step"),
                      "ooc_step_s": statistics.median(t_ooc), "ooc_step_min_s": min(t_ooc),
                      "ooc_step_max_s": max(t_ooc), "ram_step_s": med(ram, "step_time_s"),
                      "ooc_peak_rss_bytes": med(ooc, "peak_rss_bytes"),
                      "ram_starpu_peak_bytes": med(ram, "starpu_peak_bytes"), "runs": len(ooc)}
        row["throughput_vs_in_memory"] = row["ram_step_s"] / row["ooc_step_s"]
        first = out[0] if out and "error" not in out[0] else None
        if first is not None:
            row["disk_vs_first"] = row["disk_bytes_per_step"] / max(1.0, first[
                "disk_bytes_per_step"])
            row["ooc_speed_vs_first"] = first["ooc_step_s"] / row["ooc_step_s"]
        out.append(row)
    return out


def report_precisions(res: dict) -> str:
    first = res["precisions"][0]
    lines = [f"out of core under one StarPU RAM cap per model, precisions interleaved, "
             f"medians of {res['repeats']} round(s); ratios against {first}",
             f"{'cap MiB':>8}{'at':>4}{'E':>6}{'precision':>14}{'limit':>7}{'disk MiB':>10}"
             f"{'read':>8}{'written':>9}{'ooc s':>8}{'min–max s':>13}{'RAM s':>8}"
             f"{'vs RAM':>8}{'disk/' + first:>11}{'speed/' + first:>12}"]
    for t in res["table"]:
        head = f"{t['cap_mb']:8d}{t['at']:>3}x{t['n_embd']:6d}{t['precision']:>14}"
        if "error" in t:
            lines.append(f"{head}  error: {t['error']}")
            continue
        lines.append(f"{head}{t['memory_limit_mb']:7d}{t['disk_bytes_per_step'] / MIB:10.0f}"
                     f"{t['disk_read_per_step'] / MIB:8.0f}{t['disk_written_per_step'] / MIB:9.0f}"
                     f"{t['ooc_step_s']:8.2f}{t['ooc_step_min_s']:6.2f}–{t['ooc_step_max_s']:<6.2f}"
                     f"{t['ram_step_s']:8.2f}{t['throughput_vs_in_memory']:8.2f}"
                     f"{t.get('disk_vs_first', math.nan):11.2f}"
                     f"{t.get('ooc_speed_vs_first', math.nan):12.2f}")
    return "\n".join(lines)


# ---- the hints: each one's effect out of core ---------------------------------------
def hint_configs() -> list[tuple[str, str]]:
    """(label, hints) pairs: none, the default ("auto" out of core: ``spec.OOC_HINTS``),
    all, and all but one for each hint."""
    return ([("none", "none"), ("auto", ",".join(OOC_HINTS)), ("all", ",".join(HINTS))]
            + [(f"all but {h}", ",".join(x for x in HINTS if x != h)) for h in HINTS])


def run_hints(base: ExperimentSpec | None = None, *, fraction: float = 0.5,
              ooc_dir: str | None = None, repeats: int = 1, progress=print) -> dict:
    """Disk traffic, step time and peaks of ``base`` (default: the main job) out of core
    with StarPU's RAM capped at ``fraction`` of the planner's peak, for every set of
    ``hint_configs()``, each in a fresh process (``repeats`` times, interleaved so that a
    noisy neighbour hits every set alike), plus one in-memory run for reference."""
    base = base or DEFAULTS
    ooc_dir = ooc_dir or tempfile.mkdtemp(prefix="nntile_lab_hints_")
    peak = memory.estimate(base.replace(memory_limit_mb=None, ooc_dir=None)).peak_bytes
    limit = max(16, int(peak * fraction) // MIB)
    ooc = base.replace(memory_limit_mb=limit, ooc_dir=ooc_dir,
                       ooc_size_mb=max(64, 2 * peak // MIB))
    configs = hint_configs()
    rows = []
    for r in range(repeats):
        for label, hints in configs:
            res = measure(ooc.replace(hints=hints))
            rows.append({"hints": label, "set": hints, "repeat": r, **res})
            progress(f"hints {label} (repeat {r + 1}/{repeats}): {_short(res)}")
    ram = measure(base.replace(memory_limit_mb=None, ooc_dir=None))
    progress(f"in memory: {_short(ram)}")
    table = []
    for label, hints in configs:
        runs = [x for x in rows if x["hints"] == label and "error" not in x]
        errors = [x["error"] for x in rows if x["hints"] == label and "error" in x]
        if not runs:
            table.append({"hints": label, "error": errors[0] if errors else "no run"})
            continue
        med = {k: statistics.median(x[k] for x in runs) for k in
               ("step_time_s", "disk_written_per_step", "disk_read_per_step",
                "starpu_peak_bytes", "peak_rss_bytes")}
        times = [t for x in runs for t in x.get("step_times_s", [x["step_time_s"]])]
        table.append({"hints": label, "set": hints, **med, "step_time_min_s": min(times),
                      "step_time_max_s": max(times), "runs": len(runs)})
    none = next((t for t in table if t["hints"] == "none" and "error" not in t), None)
    for t in table:
        if none and "error" not in t:
            t["written_vs_none"] = t["disk_written_per_step"] / max(1.0, none[
                "disk_written_per_step"])
            t["read_vs_none"] = t["disk_read_per_step"] / max(1.0, none["disk_read_per_step"])
            t["time_vs_none"] = t["step_time_s"] / none["step_time_s"]
    return {"spec": base.to_dict(), "memory_limit_mb": limit, "planned_peak_bytes": peak,
            "fraction": fraction, "repeats": repeats, "rows": rows, "table": table,
            "in_memory": ram}


def report_hints(res: dict) -> str:
    lines = [f"out of core, StarPU RAM cap {res['memory_limit_mb']} MiB = "
             f"{res['fraction']:.2f} × planned peak {res['planned_peak_bytes'] / MIB:.0f} MiB; "
             f"medians of {res['repeats']} run(s)",
             f"{'hints':<22}{'written MiB':>12}{'read MiB':>10}{'step s':>8}{'min–max s':>13}"
             f"{'peak MiB':>10}{'RSS MiB':>9}{'W/none':>8}{'R/none':>8}{'t/none':>8}"]
    for t in res["table"]:
        if "error" in t:
            lines.append(f"{t['hints']:<22}error: {t['error']}")
            continue
        lines.append(f"{t['hints']:<22}{t['disk_written_per_step'] / MIB:12.0f}"
                     f"{t['disk_read_per_step'] / MIB:10.0f}{t['step_time_s']:8.2f}"
                     f"{t['step_time_min_s']:6.2f}–{t['step_time_max_s']:<6.2f}"
                     f"{t['starpu_peak_bytes'] / MIB:10.0f}{t['peak_rss_bytes'] / MIB:9.0f}"
                     f"{t.get('written_vs_none', math.nan):8.2f}"
                     f"{t.get('read_vs_none', math.nan):8.2f}"
                     f"{t.get('time_vs_none', math.nan):8.2f}")
    ram = res["in_memory"]
    if "error" not in ram:
        lines.append(f"{'in memory (all)':<22}{0:12.0f}{0:10.0f}{ram['step_time_s']:8.2f}"
                     f"{'':13}{ram['starpu_peak_bytes'] / MIB:10.0f}"
                     f"{ram['peak_rss_bytes'] / MIB:9.0f}")
    return "\n".join(lines)


def _short(res: dict) -> str:
    if "error" in res:
        return f"error: {res['error']}"
    return (f"step {res['step_time_s']:.2f} s, written {res['disk_written_per_step'] / MIB:.0f}"
            f" MiB, read {res['disk_read_per_step'] / MIB:.0f} MiB per step, StarPU peak "
            f"{res['starpu_peak_bytes'] / MIB:.0f} MiB, RSS {res['peak_rss_bytes'] / MIB:.0f} MiB")


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"
