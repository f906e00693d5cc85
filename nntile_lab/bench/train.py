"""GPT-2 training throughput: nntile_lab and the PyTorch reference on the same
ExperimentSpec and cores, in the same run, with MFU against the machine's one sgemm peak
(``nntile_lab.sgemm_peak``, as in every trace and sweep). nntile_lab's
step is the trainer's (``experiment.build`` / ``step_function``: the spec's optimizer,
learning-rate schedule, clipping and gradient accumulation)."""
from __future__ import annotations

import statistics

from nntile_lab import experiment, sgemm_peak
from nntile_lab.bench import torch_baseline
from nntile_lab.bench.common import machine, numpy_blas_threads
from nntile_lab.spec import ExperimentSpec


def _nntile_step_times(spec: ExperimentSpec) -> tuple[list[float], int]:
    """The measured steps' wall times of the spec's run (model, optimizer and step as the
    trainer builds them: ``experiment``), after its ``warmup_steps``; and the worker count."""
    with experiment.runtime(spec) as rt:
        model, opt, schedule = experiment.build(spec)
        step = experiment.step_function(spec, rt, model, opt, schedule,
                                        experiment.RandomTokens(spec.vocab_size))
        return experiment.timed_steps(step, spec.warmup_steps, spec.measure_steps), rt.nworkers


def torch_baselines(spec: ExperimentSpec, threads: int, compile: bool = True) -> dict:
    """nanoGPT-style PyTorch, eager and (with ``compile``) under torch.compile, on the
    same spec and cores: {"eager": result, "compiled": result} (bench.torch_baseline)."""
    out = {"eager": torch_baseline.measure(spec, threads=threads)}
    if compile:
        out["compiled"] = torch_baseline.measure(spec, threads=threads, compile=True)
    return out


def run(spec: ExperimentSpec, *, vs_torch: bool = True, torch_compile: bool = True) -> dict:
    """Median step time of both systems on ``spec`` (its model, tiles, batch, sequence,
    scheduler, workers, ``warmup_steps`` and ``measure_steps``). With ``vs_torch``, the
    ratio is against the faster of nanoGPT-style PyTorch eager and compiled
    (``torch_compile``); both are under ``res["torch"]``."""
    if not isinstance(spec, ExperimentSpec):
        raise TypeError(f"bench.train.run takes an ExperimentSpec, got {type(spec).__name__}")
    cfg = spec.gpt2_config()
    flops = spec.flops_per_step()
    times, workers = _nntile_step_times(spec)
    seconds = statistics.median(times)
    # a step faster than the cached peak proves that peak was measured on busy cores
    peak = sgemm_peak.gflops(at_least=flops / min(times) / 1e9)
    res = {"bench": "train", "spec": spec.to_dict(), "config": cfg.to_dict(),
           "batch": spec.batch, "seq_len": spec.seq_len, "scheduler": spec.scheduler,
           "workers": workers, "steps": spec.measure_steps, "flops_per_step": flops,
           "nntile_step_s": seconds, "nntile_step_times_s": times,
           "nntile_gflops": flops / seconds / 1e9,
           "nntile_tokens_per_s": spec.tokens_per_step() / seconds,
           "peak_gflops": peak, "numpy_blas_threads": numpy_blas_threads(), "machine": machine()}
    res["nntile_mfu"] = res["nntile_gflops"] / peak
    if vs_torch:
        base = torch_baselines(spec, workers, torch_compile)
        best = max(base, key=lambda k: base[k]["gflops"])
        res |= {"torch": base, "torch_best": best, "torch_step_s": base[best]["step_time_s"],
                "torch_gflops": base[best]["gflops"],
                "torch_tokens_per_s": base[best]["tokens_per_s"], "torch_threads": workers}
        res["ratio"] = res["nntile_gflops"] / res["torch_gflops"]
    return res


def report(res: dict) -> str:
    c = res["config"]
    lines = [f"GPT-2 L={c['n_layer']} E={c['n_embd']} H={c['n_head']} V={c['vocab_size']} "
             f"T={res['seq_len']} B={res['batch']}, fwd+bwd+AdamW, median of {res['steps']} "
             f"steps; sgemm peak {res['peak_gflops']:.1f} GFLOP/s",
             f"nntile_lab ({res['scheduler']}, {res['workers']} workers): "
             f"{res['nntile_gflops']:.1f} GFLOP/s, {res['nntile_tokens_per_s']:.0f} tokens/s, "
             f"MFU {res['nntile_mfu']:.2f}"]
    for kind, r in res.get("torch", {}).items():
        extra = f", compiled in {r['compile_time_s']:.0f} s" if r["compile"] else ""
        lines.append(f"PyTorch nanoGPT {kind} ({r['threads']} threads, AdamW {r['adamw']}): "
                     f"{r['gflops']:.1f} GFLOP/s, {r['tokens_per_s']:.0f} tokens/s{extra}")
    if "ratio" in res:
        lines.append(f"ratio nntile/torch ({res['torch_best']}, the faster): "
                     f"{res['ratio']:.2f}")
    return "\n".join(lines)
