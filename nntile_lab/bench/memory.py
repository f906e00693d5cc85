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
"""
from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from nntile_lab import memory
from nntile_lab.spec import ExperimentSpec

MIB = 1 << 20
# the paper's family at a size this machine trains: 4 layers, E = 64·k, V = 50257
BASE = dict(n_layer=4, n_head=4, vocab_size=50257, seq_len=128, batch=4, batch_tile=2,
            vocab_tile=4096, inner_tile=512, head_tile=2, warmup_steps=1, measure_steps=2)
WIDTHS = tuple(64 * k for k in range(2, 41))          # E = 128 … 2560


def family(n_embd: int, **kw) -> ExperimentSpec:
    return ExperimentSpec(**(BASE | {"n_embd": n_embd} | kw))


def measure_point(spec: ExperimentSpec) -> dict:
    """Train ``spec`` for warmup + measure steps in this process: step time (median),
    StarPU's peak RAM, the process's peak RSS, the disk traffic per measured step."""
    from nntile_lab import experiment
    from nntile_lab._lib import lib

    batches = experiment.RandomTokens(spec.vocab_size)
    with experiment.runtime(spec) as rt:
        model, opt, schedule = experiment.build(spec)
        step = experiment.step_function(spec, rt, model, opt, schedule, batches)
        lib.nl_sampler_start(0.5)   # often enough not to miss a short peak
        try:
            for k in range(spec.warmup_steps):
                step(k)
            rt.disk_traffic(reset=True)
            times = []
            for k in range(spec.warmup_steps, spec.warmup_steps + spec.measure_steps):
                t0 = time.perf_counter()
                step(k)
                times.append(time.perf_counter() - t0)
            traffic = rt.disk_traffic()
        finally:
            lib.nl_sampler_stop()
        from nntile_lab.trace.records import _drain_samples
        samples = _drain_samples()
        starpu_peak = samples["used"][samples["node"] == 0].max()   # RAM only, not disk
    n = spec.measure_steps
    disk = (traffic["bytes_read"] + traffic["bytes_written"]) / n
    t = statistics.median(times)
    return {"step_time_s": t, "tokens_per_s": spec.tokens_per_step() / t,
            "starpu_peak_bytes": int(starpu_peak), "peak_rss_bytes": memory.peak_rss_bytes(),
            "disk_bytes_per_step": disk, "disk_read_per_step": traffic["bytes_read"] / n,
            "disk_written_per_step": traffic["bytes_written"] / n,
            "disk_bandwidth_bytes_s": disk / t if t else 0.0}


def torch_point(spec: ExperimentSpec) -> dict:
    """PyTorch fp32 AdamW on ``spec``'s model in this process: step time, peak RSS."""
    import numpy as np
    import torch

    from nntile_lab.reference.torch_gpt2 import TorchGPT2
    torch.set_num_threads(spec.ncpu or os.cpu_count() or 1)
    model = TorchGPT2(spec.gpt2_config(), dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(0)
    times = []
    for k in range(spec.warmup_steps + spec.measure_steps):
        ids = rng.integers(0, spec.vocab_size, (spec.batch, spec.seq_len + 1))
        t0 = time.perf_counter()
        model.forward_backward(ids[:, :-1], ids[:, 1:])
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if k >= spec.warmup_steps:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    return {"step_time_s": t, "tokens_per_s": spec.tokens_per_step() / t,
            "peak_rss_bytes": memory.peak_rss_bytes()}


def measure(spec: ExperimentSpec, system: str = "nntile", timeout: float = 1800) -> dict:
    """``measure_point`` (or ``torch_point``) of ``spec`` in a fresh process; a failed or
    killed run gives ``{"error": ...}``."""
    cmd = [sys.executable, "-m", "nntile_lab.bench.memory", "--point", system,
           json.dumps(spec.to_dict())]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if out.returncode:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"rc {out.returncode}"]
        return {"error": tail[0]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _largest(widths, fits) -> tuple[int | None, dict | None]:
    """The widest E for which ``fits(E)`` returns a result (it stops at the first miss)."""
    best = None
    for e in widths:
        res = fits(e)
        if res is None:
            break
        best = (e, res)
    return best if best else (None, None)


def run(caps_mb=(2048, 4096), *, ooc_dir: str | None = None, widths=WIDTHS,
        progress=print) -> dict:
    """The capacity experiment for each cap; returns the table and the summary."""
    ooc_dir = ooc_dir or tempfile.mkdtemp(prefix="nntile_lab_ooc_")
    rows, summary = [], {}
    for cap in caps_mb:
        def torch_fits(e, cap=cap):
            spec = family(e)
            if memory.estimate(spec).peak_bytes > 4 * cap * MIB:   # hopeless: skip the run
                return None
            res = measure(spec, "torch")
            ok = "error" not in res and res["peak_rss_bytes"] <= cap * MIB
            progress(f"cap {cap} MiB torch E={e}: {res}")
            rows.append({"cap_mb": cap, "system": "torch", "n_embd": e,
                         "params": spec.num_params(), **res})
            return res if ok else None

        def ooc_spec(e, cap=cap):
            spec = family(e)
            limit = memory.starpu_limit_mb(cap, spec)
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

        e_torch, _ = _largest(widths, torch_fits)
        e_ooc, _ = _largest([e for e in widths if e_torch is None or e > e_torch] or widths,
                            nntile_fits)
        p_torch = family(e_torch).num_params() if e_torch else 0
        p_ooc = family(e_ooc).num_params() if e_ooc else 0
        # throughput at k× the cap: the model whose in-memory StarPU peak is nearest k·cap
        speed = {}
        for k in (1, 2, 4):
            e = min(widths, key=lambda w: abs(memory.estimate(family(w)).peak_bytes
                                              + memory.PROCESS_BASE_BYTES - k * cap * MIB))
            ram, ooc = measure(family(e)), measure(ooc_spec(e))
            ratio = (ram["step_time_s"] / ooc["step_time_s"]
                     if "error" not in ram and "error" not in ooc else None)
            speed[k] = {"n_embd": e, "params": family(e).num_params(), "in_memory": ram,
                        "out_of_core": ooc, "throughput_ratio": ratio}
            progress(f"cap {cap} MiB at {k}x: E={e} ratio {ratio}")
        summary[cap] = {"torch_largest_params": p_torch, "torch_largest_n_embd": e_torch,
                        "nntile_largest_params": p_ooc, "nntile_largest_n_embd": e_ooc,
                        "capacity_ratio": p_ooc / p_torch if p_torch else None,
                        "throughput": speed}
    first = summary[caps_mb[0]]
    return {"rows": rows, "summary": summary, "cap_mb": list(caps_mb),
            "capacity_ratio": first["capacity_ratio"],
            "throughput_at_2x": first["throughput"][2]["throughput_ratio"]}


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


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _point_main(argv) -> int:
    system, spec = argv[0], ExperimentSpec.from_dict(json.loads(argv[1]))
    res = torch_point(spec) if system == "torch" else measure_point(spec)
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--point"]:
    sys.exit(_point_main(sys.argv[2:]))
