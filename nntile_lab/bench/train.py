"""GPT-2 training throughput: nntile_lab and the PyTorch reference on the same
ExperimentSpec and cores, in the same run, with MFU against the machine's one sgemm peak
(``nntile_lab.sgemm_peak``, as in every trace and sweep). nntile_lab's
step is the trainer's (``experiment.build`` / ``step_function``: the spec's optimizer,
learning-rate schedule, clipping and gradient accumulation).

Precision: nntile_lab runs the spec's ``precision``; its PyTorch peer runs what that mode
computes in (``reference.autocast.peer_precision``: bf16 autocast for ``bf16``, fp32
otherwise). ``with_fp32`` adds the fp32 pair (nntile_lab fp32, PyTorch fp32) to the same
run, so that "bf16 against own fp32" is read off one run. ``rounds``: every series is
measured once per round, the rounds one after the other (interleaved: a neighbour's burst on
a shared machine hits every series alike); each series' step times are pooled over the
rounds, and the ratios are of the pooled medians, with each round's own ratio beside them.
"""
from __future__ import annotations

import statistics

from nntile_lab import experiment, sgemm_peak
from nntile_lab.bench import torch_baseline
from nntile_lab.bench.common import machine, numpy_blas_threads
from nntile_lab.reference.autocast import peer_precision
from nntile_lab.spec import ExperimentSpec

TORCH_KINDS = ("eager", "compiled")


def _nntile_step_times(spec: ExperimentSpec) -> tuple[list[float], int]:
    """The measured steps' wall times of the spec's run (model, optimizer and step as the
    trainer builds them: ``experiment``), after its ``warmup_steps``; and the worker count."""
    with experiment.runtime(spec) as rt:
        model, opt, schedule = experiment.build(spec)
        step = experiment.step_function(spec, rt, model, opt, schedule,
                                        experiment.RandomTokens(spec.vocab_size))
        return experiment.timed_steps(step, spec.warmup_steps, spec.measure_steps), rt.nworkers


def torch_baselines(spec: ExperimentSpec, threads: int, compile: bool = True,
                    precision: str = "fp32") -> dict:
    """The model's PyTorch peer, eager and (with ``compile``) under torch.compile, on the
    same spec and cores, in ``precision`` (``fp32`` or ``bf16`` autocast):
    {"eager": result, "compiled": result} (bench.torch_baseline)."""
    bf16 = precision == "bf16"
    out = {"eager": torch_baseline.measure(spec, threads=threads, bf16=bf16)}
    if compile:
        out["compiled"] = torch_baseline.measure(spec, threads=threads, compile=True, bf16=bf16)
    return out


def resolve_precision(spec: ExperimentSpec) -> tuple[str, str]:
    """The mode nntile_lab's step runs in for ``spec.precision`` and why (``auto`` is
    decided once, here, from the measured GEMM peaks: every round then runs the same mode)."""
    return experiment.choose_precision(spec)


def check_torch_precision(precision: str) -> None:
    """PyTorch bf16 autocast is a baseline only where the CPU runs bf16 in hardware."""
    if precision == "bf16" and not torch_baseline.cpu_has_bf16():
        raise ValueError("--vs-torch with precision bf16: PyTorch's bf16 autocast needs a CPU "
                         "with avx512_bf16 or amx_bf16 (here it would be emulated, not a "
                         "baseline); compare with --precision fp32 or bf16-storage instead")


def _series(mode: str, vs_torch: bool, torch_compile: bool, with_fp32: bool) -> list[tuple]:
    """(system, precision) pairs in measurement order: nntile_lab then its PyTorch peers,
    in the spec's mode, then (``with_fp32``) the fp32 pair; no pair twice."""
    kinds = TORCH_KINDS if torch_compile else TORCH_KINDS[:1]
    out = []
    for prec in [mode] + (["fp32"] if with_fp32 else []):
        peer = peer_precision(prec)
        for s in [("nntile", prec)] + ([(k, peer) for k in kinds] if vs_torch else []):
            if s not in out:
                out.append(s)
    return out


def _pooled(times: list[float], flops: int, tokens: int) -> dict:
    med = statistics.median(times)
    return {"step_time_s": med, "step_time_min_s": min(times), "step_time_max_s": max(times),
            "step_times_s": times, "gflops": flops / med / 1e9, "tokens_per_s": tokens / med}


def run(spec: ExperimentSpec, *, vs_torch: bool = True, torch_compile: bool = True,
        with_fp32: bool = False, rounds: int = 1, progress=None) -> dict:
    """Median step time of both systems on ``spec`` (its model, tiles, batch, sequence,
    precision, scheduler, workers, ``warmup_steps`` and ``measure_steps``). With
    ``vs_torch``, the ratio is against the faster of the model's PyTorch peer (nanoGPT-style
    for GPT-2, the fast PyTorch Llama for a Llama) eager and compiled (``torch_compile``) in
    the peer precision; both are under ``res["torch"]``. With
    ``with_fp32`` (and a precision other than fp32) the fp32 pair is measured in the same
    run, under ``res["fp32"]``, with ``vs_own_fp32`` = nntile_lab's speed-up over its own
    fp32. ``rounds`` interleaved rounds (module doc); ``progress``: a callable given a line
    after each measurement."""
    if not isinstance(spec, ExperimentSpec):
        raise TypeError(f"bench.train.run takes an ExperimentSpec, got {type(spec).__name__}")
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds={rounds!r} must be a positive integer")
    mode, why = resolve_precision(spec)
    series = _series(mode, vs_torch, torch_compile, with_fp32 and mode != "fp32")
    if vs_torch:   # both before minutes of measuring nntile_lab
        torch_baseline.check_peer(spec.model)
        for _, prec in series:
            check_torch_precision(prec)
    cfg = spec.model_config()
    flops, tokens = spec.flops_per_step(), spec.tokens_per_step()
    times = {s: [] for s in series}
    torch_meta: dict = {}
    per_round: list[dict] = []
    workers = None
    for r in range(rounds):
        medians = {}
        for system, prec in series:
            if system == "nntile":
                t, workers = _nntile_step_times(spec.replace(precision=prec))
            else:
                m = torch_baseline.measure(spec, threads=workers, compile=system == "compiled",
                                           bf16=prec == "bf16")
                t = m["step_times_s"]
                # compile time: the first round's (later rounds may reuse dynamo's cache)
                torch_meta.setdefault((system, prec), m)
            times[(system, prec)] += t
            medians[(system, prec)] = statistics.median(t)
            if progress:
                progress(f"round {r + 1}/{rounds}: {_label(system, prec)} "
                         f"{flops / medians[(system, prec)] / 1e9:.1f} GFLOP/s")
        per_round.append(medians)

    def block(prec: str) -> dict:
        """The results of nntile_lab in ``prec`` and of its PyTorch peers."""
        own = _pooled(times[("nntile", prec)], flops, tokens)
        out = {"precision": prec, "nntile_step_s": own["step_time_s"],
               "nntile_step_times_s": own["step_times_s"],
               "nntile_step_min_s": own["step_time_min_s"],
               "nntile_step_max_s": own["step_time_max_s"],
               "nntile_gflops": own["gflops"], "nntile_tokens_per_s": own["tokens_per_s"]}
        peer = peer_precision(prec)
        base = {k: torch_meta[(k, peer)] | _pooled(times[(k, peer)], flops, tokens)
                for k in TORCH_KINDS if (k, peer) in times}
        if base:
            best = max(base, key=lambda k: base[k]["gflops"])
            out |= {"torch": base, "torch_best": best, "torch_precision": peer,
                    "torch_step_s": base[best]["step_time_s"],
                    "torch_gflops": base[best]["gflops"],
                    "torch_tokens_per_s": base[best]["tokens_per_s"], "torch_threads": workers}
            out["ratio"] = out["nntile_gflops"] / out["torch_gflops"]
            # each round's own ratio against that round's faster PyTorch: the spread of
            # the comparison on a shared machine
            out["round_ratios"] = [min(m[(k, peer)] for k in base) / m[("nntile", prec)]
                                   for m in per_round]
        return out

    res = {"bench": "train", "spec": spec.to_dict(), "config": cfg.to_dict(),
           "batch": spec.batch, "seq_len": spec.seq_len, "scheduler": spec.scheduler,
           "workers": workers, "steps": spec.measure_steps, "rounds": rounds,
           "order": [_label(*s) for s in series], "flops_per_step": flops,
           "precision_asked": spec.precision, "precision_why": why,
           "numpy_blas_threads": numpy_blas_threads(), "machine": machine()} | block(mode)
    fp32_times = times.get(("nntile", "fp32"))
    # a step faster than the cached peak proves that peak was measured on busy cores; only
    # an fp32 step says so (a bf16 GEMM may beat sgemm's peak by design)
    res["peak_gflops"] = sgemm_peak.gflops(
        at_least=flops / min(fp32_times) / 1e9 if fp32_times else None)
    # MFU: against the sgemm peak, for a step that computes in fp32
    res["nntile_mfu"] = res["nntile_gflops"] / res["peak_gflops"] if mode != "bf16" else None
    if with_fp32 and mode != "fp32":
        res["fp32"] = block("fp32")
        res["fp32"]["nntile_mfu"] = res["fp32"]["nntile_gflops"] / res["peak_gflops"]
        res["vs_own_fp32"] = res["nntile_gflops"] / res["fp32"]["nntile_gflops"]
        if "torch_gflops" in res and "torch_gflops" in res["fp32"]:
            res["torch_vs_own_fp32"] = res["torch_gflops"] / res["fp32"]["torch_gflops"]
    return res


_PEER = {"nanogpt": "nanoGPT", "torch_llama": "Llama"}
# the report's name of a model (a user's model: its registered name)
_MODEL = {"gpt2": "GPT-2", "llama": "Llama"}


def _label(system: str, precision: str) -> str:
    return (f"nntile_lab {precision}" if system == "nntile"
            else f"PyTorch {precision} {system}")


def _lines(b: dict, res: dict) -> list[str]:
    prec = b["precision"]
    mfu = (f", MFU {b['nntile_mfu']:.2f}" if b.get("nntile_mfu") is not None else "")
    lines = [f"nntile_lab {prec} ({res['scheduler']}, {res['workers']} workers): "
             f"{b['nntile_gflops']:.1f} GFLOP/s, {b['nntile_tokens_per_s']:.0f} tokens/s"
             f"{mfu} (steps {b['nntile_step_min_s']:.3f}–{b['nntile_step_max_s']:.3f} s)"]
    for kind, r in b.get("torch", {}).items():
        extra = f", compiled in {r['compile_time_s']:.0f} s" if r["compile"] else ""
        lines.append(f"PyTorch {_PEER.get(r['model'], r['model'])} {b['torch_precision']} {kind} "
                     f"({r['threads']} threads, "
                     f"AdamW {r['adamw']}): {r['gflops']:.1f} GFLOP/s, "
                     f"{r['tokens_per_s']:.0f} tokens/s (steps {r['step_time_min_s']:.3f}–"
                     f"{r['step_time_max_s']:.3f} s){extra}")
    if "ratio" in b:
        rr = b["round_ratios"]
        spread = (f"; per round {min(rr):.2f}–{max(rr):.2f}" if len(rr) > 1 else "")
        lines.append(f"ratio nntile_lab {prec} / PyTorch {b['torch_precision']} "
                     f"({b['torch_best']}, the faster): {b['ratio']:.2f}{spread}")
    return lines


def report(res: dict) -> str:
    c = res["config"]
    mode = res["precision"]
    asked = (f" (auto: {res['precision_why']})" if res.get("precision_asked") == "auto"
             else "")
    lines = [f"{_MODEL.get(res['spec'].get('model', 'gpt2'), res['spec'].get('model'))} "
             f"L={c['n_layer']} E={c['n_embd']} H={c['n_head']} V={c['vocab_size']} "
             f"T={res['seq_len']} B={res['batch']}, fwd+bwd+AdamW, precision {mode}{asked}, "
             f"median of {res['steps']} steps x {res.get('rounds', 1)} interleaved round(s); "
             f"sgemm peak {res['peak_gflops']:.1f} GFLOP/s"]
    lines += _lines(res, res)
    if "fp32" in res:
        lines += _lines(res["fp32"], res)
        lines.append(f"nntile_lab {mode} / own fp32: {res['vs_own_fp32']:.2f}"
                     + (f"; PyTorch {res['torch_precision']} / PyTorch fp32: "
                        f"{res['torch_vs_own_fp32']:.2f}" if "torch_vs_own_fp32" in res else ""))
    return "\n".join(lines)
