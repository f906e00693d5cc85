"""The strongest PyTorch CPU baseline for a training step: for GPT-2 nanoGPT's model
(``reference/nanogpt.py``), for a Llama the fast PyTorch Llama (``reference/torch_llama.py``,
``fast=True``: fused grouped-query attention, ``F.rms_norm``); fp32 AdamW in whichever
implementation (fused or foreach) is faster here, gradient clipping at 1.0 as nntile_lab's
step does, optionally under ``torch.compile`` (compile time reported apart from step time)
and bf16 autocast.

``measure(cfg_or_spec, batch, seq_len, compile=..., bf16=...)`` → dict with gflops,
tokens_per_s, step_time_s (median) and its spread, compile_time_s, peak_rss_mb.
FLOPs per step are the model's (6·N + 12·L·E·T per token), as for nntile_lab.
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

from nntile_lab.engine.facts import cpuinfo
from nntile_lab.experiment import timed_steps
from nntile_lab.nn.config import LlamaConfig, model_name
from nntile_lab.rss import peak_rss_mb, reset_peak_rss
from nntile_lab.spec import ExperimentSpec

# CPU flags under which bf16 autocast runs in hardware (else it is emulated: no baseline)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_bf16() -> bool:
    return bool(set(cpuinfo().get("flags", "").split()) & set(BF16_FLAGS))


def _adamw(params, impl: str):
    # torch: an optional heavy dependency, loaded where it is used
    import torch
    return torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                             **{impl: True})


def pick_adamw(model, repeats: int = 3) -> str:
    """"fused" or "foreach", whichever steps this model's parameters faster (timed on
    throw-away copies; the model itself is left untouched)."""
    # torch: an optional heavy dependency, loaded where it is used
    import torch
    best, best_t = "foreach", float("inf")
    for impl in ("fused", "foreach"):
        params = [torch.nn.Parameter(p.detach().clone()) for p in model.parameters()]
        for p in params:
            p.grad = torch.randn_like(p) * 1e-3
        try:
            opt = _adamw(params, impl)
            opt.step()
        except (RuntimeError, TypeError):
            continue  # this torch has no fused CPU AdamW
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        if statistics.median(times) < best_t:
            best, best_t = impl, statistics.median(times)
        del opt, params
    return best


def _resolve(cfg, batch, seq_len, steps, warmup):
    if isinstance(cfg, ExperimentSpec):
        spec = cfg
        cfg = spec.model_config()
        batch = spec.batch if batch is None else batch
        seq_len = spec.seq_len if seq_len is None else seq_len
        steps = spec.measure_steps if steps is None else steps
        warmup = spec.warmup_steps if warmup is None else warmup
    if batch is None or seq_len is None:
        raise ValueError("measure(cfg, batch, seq_len): give batch and seq_len with a model "
                         "config (an ExperimentSpec carries them)")
    steps = 5 if steps is None else steps
    warmup = 1 if warmup is None else warmup
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps={steps} must be ≥ 1 and warmup={warmup} ≥ 0")
    if seq_len > cfg.n_positions:
        raise ValueError(f"seq_len={seq_len} exceeds n_positions={cfg.n_positions}")
    return cfg, batch, seq_len, steps, warmup


def measure(cfg, batch: int | None = None, seq_len: int | None = None, *,
            compile: bool = False, bf16: bool = False, steps: int | None = None,
            warmup: int | None = None, threads: int | None = None, seed: int = 0) -> dict:
    """Time ``steps`` training steps (after ``warmup``) of the PyTorch model of ``cfg``'s
    kind (nanoGPT for a GPT2Config, the fast PyTorch Llama for a LlamaConfig).

    ``cfg``: a model config (then give batch and seq_len) or an ExperimentSpec (batch,
    seq_len, measure_steps and warmup_steps come from it unless given). ``threads``:
    torch's intra-op threads (default: every core this process may use). With
    ``compile``, the first call compiles: its time minus a median step is compile_time_s.
    ``bf16``: autocast matmuls to bfloat16 (fp32 weights and Adam state); only where the
    CPU has bf16 instructions (avx512_bf16 / amx_bf16), else ValueError.
    """
    # torch and the PyTorch models: optional heavy dependencies, loaded where they are used
    import torch

    from nntile_lab.reference.autocast import autocast
    cfg, batch, seq_len, steps, warmup = _resolve(cfg, batch, seq_len, steps, warmup)
    if bf16 and not cpu_has_bf16():
        raise ValueError("bf16=True needs a CPU with avx512_bf16 or amx_bf16 (this one has "
                         "neither: bf16 would be emulated, not a baseline); use bf16=False")
    threads = threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    rss_reset = reset_peak_rss()
    torch.manual_seed(seed)
    name, model = torch_model(cfg, seed)
    impl = pick_adamw(model)
    opt = _adamw(model.parameters(), impl)
    fwd_bwd = model.loss_tensor
    if compile:
        fwd_bwd = torch.compile(model.loss_tensor)
    rng = np.random.default_rng(seed)
    count = warmup + steps + 1
    data = torch.as_tensor(rng.integers(0, cfg.vocab_size, (count, batch, seq_len + 1)))

    def step(i):
        model.zero_grad(set_to_none=True)
        with autocast("bf16" if bf16 else "fp32"):
            loss = fwd_bwd(data[i, :, :-1], data[i, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        return loss

    t0 = time.perf_counter()
    first_loss = float(step(0).detach())
    first = time.perf_counter() - t0
    times = timed_steps(step, warmup, steps, first=1)
    med = statistics.median(times)
    flops = cfg.flops_per_token(seq_len) * batch * seq_len
    return {"model": name, "compile": compile, "bf16": bf16,
            "precision": "bf16" if bf16 else "fp32", "adamw": impl,
            "threads": threads, "batch": batch, "seq_len": seq_len, "steps": steps,
            "warmup": warmup, "flops_per_step": flops, "step_time_s": med,
            "step_time_min_s": min(times), "step_time_max_s": max(times),
            "step_times_s": times, "gflops": flops / med / 1e9,
            "tokens_per_s": batch * seq_len / med,
            "compile_time_s": max(first - med, 0.0) if compile else 0.0,
            "first_loss": first_loss, "peak_rss_mb": peak_rss_mb(),
            "peak_rss_scope": "baseline" if rss_reset else "process",
            "torch": torch.__version__}


# The models with a PyTorch twin (their registered names): a user's model has none
PEERS = ("gpt2", "llama")


def check_peer(model: str) -> None:
    """ValueError when ``model`` (a registered name) has no PyTorch twin to compare with."""
    if model not in PEERS:
        raise ValueError(f"model {model!r} has no PyTorch peer (only {', '.join(PEERS)} "
                         "have one): measure it without --vs-torch / vs_torch=False")


def torch_model(cfg, seed: int = 0):
    """(name, float32 PyTorch model) of ``cfg``'s kind, initialised from ``seed``."""
    import torch  # the references need PyTorch (the bench extra), imported when used
    check_peer(model_name(cfg))   # a subclass of GPT2Config is not GPT-2
    if isinstance(cfg, LlamaConfig):
        from nntile_lab.reference.torch_llama import TorchLlama  # PyTorch inside
        return "torch_llama", TorchLlama(cfg, dtype=torch.float32, fast=True, seed=seed)
    from nntile_lab.reference.nanogpt import NanoGPT  # PyTorch inside
    return "nanogpt", NanoGPT(cfg, dtype=torch.float32, seed=seed)


def fastest(results: list[dict]) -> dict:
    """The result with the highest throughput (the baseline a ratio is taken against)."""
    return max(results, key=lambda r: r["gflops"])
