"""GPT-2 training throughput: nntile_lab and the PyTorch reference on the same
config, batches and cores, in the same run, with the sgemm peak beside them."""
from __future__ import annotations

import numpy as np

import nntile_lab as nl
from nntile_lab.bench.common import machine, median_time, numpy_blas_threads
from nntile_lab.optim import AdamW
from nntile_lab.spec import ExperimentSpec


def sgemm_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
    """numpy's sgemm on all cores: the machine's practical peak for MFU."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return 2.0 * n**3 / median_time(lambda: a @ a, repeats) / 1e9


def _batches(cfg, batch: int, seq_len: int, count: int):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (count, batch, seq_len + 1))
    return [(b[:, :-1], b[:, 1:]) for b in ids]


def _nntile_step_time(cfg, batches, steps: int, scheduler: str, ncpu) -> tuple[float, int]:
    with nl.Runtime(scheduler=scheduler, ncpu=ncpu) as rt:
        model = nl.GPT2(cfg, seed=0)
        opt = AdamW(model, lr=1e-4)
        it = iter(batches)

        def step():
            model.forward_backward(*next(it))
            opt.step(clip_norm=1.0)

        seconds = median_time(step, steps)
        return seconds, rt.nworkers


def torch_baselines(cfg, batch: int, seq_len: int, steps: int, threads: int,
                    compile: bool = True) -> dict:
    """nanoGPT-style PyTorch, eager and (with ``compile``) under torch.compile, on the
    same config and cores: {"eager": result, "compiled": result} (bench.torch_baseline)."""
    from nntile_lab.bench import torch_baseline
    out = {"eager": torch_baseline.measure(cfg, batch, seq_len, steps=steps, threads=threads)}
    if compile:
        out["compiled"] = torch_baseline.measure(cfg, batch, seq_len, steps=steps,
                                                 threads=threads, compile=True)
    return out


def run(cfg, batch: int | None = None, seq_len: int | None = None, *, steps: int = 5,
        vs_torch: bool = True, torch_compile: bool = True, scheduler: str = "lws",
        ncpu: int | None = None) -> dict:
    """Median step time of both systems. ``cfg`` is a GPT2Config (with ``batch``,
    ``seq_len`` and the keywords), or an ExperimentSpec that gives them all. With
    ``vs_torch``, the ratio is against the faster of nanoGPT-style PyTorch eager and
    compiled (``torch_compile``); both are under ``res["torch"]``."""
    if isinstance(cfg, ExperimentSpec):
        spec = cfg
        cfg, batch, seq_len = spec.gpt2_config(), spec.batch, spec.seq_len
        steps, scheduler, ncpu = spec.measure_steps, spec.scheduler, spec.ncpu
    batches = _batches(cfg, batch, seq_len, 2 * (steps + 1))
    flops = cfg.flops_per_token(seq_len) * batch * seq_len
    peak = sgemm_peak_gflops()
    seconds, workers = _nntile_step_time(cfg, batches, steps, scheduler, ncpu)
    res = {"bench": "train", "config": cfg.to_dict(), "batch": batch, "seq_len": seq_len,
           "scheduler": scheduler, "workers": workers, "steps": steps,
           "flops_per_step": flops, "nntile_step_s": seconds,
           "nntile_gflops": flops / seconds / 1e9, "nntile_tokens_per_s": batch * seq_len / seconds,
           "peak_gflops": peak, "numpy_blas_threads": numpy_blas_threads(), "machine": machine()}
    res["nntile_mfu"] = res["nntile_gflops"] / peak
    if vs_torch:
        base = torch_baselines(cfg, batch, seq_len, steps, workers, torch_compile)
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
