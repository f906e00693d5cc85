"""``bench generate``: text generation against Hugging Face ``generate`` on the same CPU,
both systems in one run, the same weights and prompts.

For each model and batch size, B random prompts of ``prompt_len`` tokens, greedy, every new
token forced (no early stop). Both systems are timed the same way, end to end: one call
generating 1 token (the prefill and its token) and one generating N; then

    prefill tokens/s = B·prompt_len / t(1),   decode tokens/s = B·(N − 1) / (t(N) − t(1))

medians over ``rounds`` interleaved rounds (nntile_lab then Hugging Face, each round), with
the spread. PyTorch gets ``ncpu`` threads, StarPU ``ncpu`` CPU workers; while Hugging Face
runs the StarPU workers sleep (``Runtime.workers_asleep``: they would poll and take its
cores). nntile_lab's own per-step timings (``Generation``) and the StarPU work per decode
step (tasks, their summed execution time, so the overhead per token beside it) are recorded
too.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from nntile_lab.nn.config import GPT2Config

# The main job's model, and the same at n_embd 1024 (16 heads of 64)
MODELS = {
    "main": dict(n_layer=4, n_head=4, n_embd=256, n_positions=128, vocab_size=50257),
    "e1024": dict(n_layer=4, n_head=16, n_embd=1024, n_positions=128, vocab_size=50257),
}


def _spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def _rates(B, T, N, t1s, tNs):
    pre = [B * T / t for t in t1s]
    dec = [B * (N - 1) / (tn - t1) for t1, tn in zip(t1s, tNs) if tn > t1]
    return {"prefill_tokens_per_s": _spread(pre), "decode_tokens_per_s": _spread(dec),
            "t1_s": _spread(t1s), "tN_s": _spread(tNs)}


def measure(model_name: str, batches=(1, 8), *, prompt_len: int = 32, new_tokens: int = 64,
            rounds: int = 3, ncpu: int = 2, scheduler: str = "lws", tiles: dict | None = None,
            cache_tile: int | None = None, seed: int = 0, log=print) -> dict:
    """One model, several batch sizes: both systems' rates and the ratios."""
    # PyTorch and Hugging Face are the bench extra's; the runtime only where it is measured
    import torch

    import nntile_lab as nl
    from nntile_lab.reference import hf_generate as hf

    sizes = MODELS[model_name]
    cfg = GPT2Config(**sizes, **(tiles or {}))
    if prompt_len + new_tokens - 1 > cfg.n_positions:
        raise ValueError(f"--prompt-len {prompt_len} + --new-tokens {new_tokens} - 1 exceeds "
                         f"n_positions={cfg.n_positions}")
    torch.set_num_threads(ncpu)
    out = {"model": model_name, "config": cfg.to_dict(), "prompt_len": prompt_len,
           "new_tokens": new_tokens, "rounds": rounds, "ncpu": ncpu, "scheduler": scheduler,
           "torch_threads": torch.get_num_threads(), "cache_tile": cache_tile, "batches": {}}
    with nl.Runtime(scheduler=scheduler, ncpu=ncpu) as rt:
        model = nl.GPT2(cfg, seed=seed)
        reference = hf.gpt2_model(cfg, model.state_dict())
        rng = np.random.default_rng(seed)
        for B in batches:
            prompts = rng.integers(0, cfg.vocab_size, (B, prompt_len)).tolist()

            def ours(n, prompts=prompts):
                t0 = time.perf_counter()
                g = model.generate(prompts, n, greedy=True, cache_tile=cache_tile)
                return time.perf_counter() - t0, g

            def theirs(n, prompts=prompts):
                # StarPU's idle workers poll (Debian's 1.3): asleep, they leave PyTorch's
                # threads the cores, as if nntile_lab were not loaded
                with rt.workers_asleep():
                    return hf.timed_generate(reference, prompts, n)

            ours(2), theirs(2)                               # warm-up: allocations, models
            o1, oN, h1, hN, steps = [], [], [], [], []
            for r in range(rounds):
                o1.append(ours(1)[0])
                t, g = ours(new_tokens)
                oN.append(t)
                steps += g.step_seconds
                h1.append(theirs(1))
                hN.append(theirs(new_tokens))
                log(f"  {model_name} B={B} round {r + 1}/{rounds}: nntile_lab t(1) {o1[-1]:.3f} s "
                    f"t({new_tokens}) {oN[-1]:.3f} s; Hugging Face {h1[-1]:.3f} s / {hN[-1]:.3f} s")
            res = {"nntile_lab": _rates(B, prompt_len, new_tokens, o1, oN),
                   "huggingface": _rates(B, prompt_len, new_tokens, h1, hN)}
            res["nntile_lab"]["step_ms"] = _spread([s * 1e3 for s in steps])
            for k in ("prefill_tokens_per_s", "decode_tokens_per_s"):
                res[f"{k.split('_')[0]}_ratio"] = (res["nntile_lab"][k]["median"]
                                                   / res["huggingface"][k]["median"])
            out["batches"][str(B)] = res
        model.free()
    return out


def report(results: list[dict]) -> str:
    lines = ["| model | batch | prefill tok/s nntile_lab | HF | ratio | decode tok/s nntile_lab "
             "| HF | ratio | step ms (min–max) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for B, res in r["batches"].items():
            o, h = res["nntile_lab"], res["huggingface"]
            s = o["step_ms"]
            lines.append(
                f"| {r['model']} | {B} | {o['prefill_tokens_per_s']['median']:.0f} | "
                f"{h['prefill_tokens_per_s']['median']:.0f} | {res['prefill_ratio']:.2f}× | "
                f"{o['decode_tokens_per_s']['median']:.1f} | "
                f"{h['decode_tokens_per_s']['median']:.1f} | {res['decode_ratio']:.2f}× | "
                f"{s['median']:.1f} ({s['min']:.1f}–{s['max']:.1f}) |")
    return "\n".join(lines)
