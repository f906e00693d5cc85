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


def _torch_step_time(cfg, batches, steps: int, threads: int) -> float:
    import torch

    from nntile_lab.reference.torch_gpt2 import TorchGPT2
    torch.set_num_threads(threads)
    model = TorchGPT2(cfg, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    it = iter(batches)

    def step():
        model.forward_backward(*next(it))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return median_time(step, steps)


def run(cfg, batch: int | None = None, seq_len: int | None = None, *, steps: int = 5,
        vs_torch: bool = True, scheduler: str = "lws", ncpu: int | None = None) -> dict:
    """Median step time of both systems. ``cfg`` is a GPT2Config (with ``batch``,
    ``seq_len`` and the keywords), or an ExperimentSpec that gives them all."""
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
        tsec = _torch_step_time(cfg, batches[steps + 1:], steps, workers)
        res |= {"torch_step_s": tsec, "torch_gflops": flops / tsec / 1e9,
                "torch_tokens_per_s": batch * seq_len / tsec, "torch_threads": workers}
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
    if "torch_gflops" in res:
        lines.append(f"PyTorch ({res['torch_threads']} threads): {res['torch_gflops']:.1f} "
                     f"GFLOP/s, {res['torch_tokens_per_s']:.0f} tokens/s; "
                     f"ratio nntile/torch {res['ratio']:.2f}")
    return "\n".join(lines)
