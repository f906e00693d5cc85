"""One point of a figure, measured in a process of its own: the engine's measurement
``figure`` (``nntile_lab.engine``; options ``system``, ``out_of_core``, ``compiled``).

Why a process per point: the memory cap is enforced on the process (like a GPU's memory is
on a job) and its peak is clean, a StarPU abort or an out-of-memory kill ends one point
rather than the figure, and both systems start equal.

The cap (the point's ``caps.memory_mb``, the plan's ``cap_mb``): the run may use that many
MiB of RAM above the process's resident size once its libraries are loaded and warmed up
(what a GPU job's own memory is on top of): one step of a tiny member of the family runs
first, then the cap starts (``engine.memcap``); over it, the point's status is "oom" — the
analogue of the paper's failed runs (shown as 0).
"""
from __future__ import annotations

import os
import statistics
import tempfile

import numpy as np

from nntile_lab import experiment
from nntile_lab.bench.torch_baseline import pick_adamw, torch_model
from nntile_lab.engine.memcap import MIB
from nntile_lab.experiment import timed_steps
from nntile_lab.figures.family import PRECISION, is_nntile

OOC_TILE_SHARE = float(os.environ.get("NNTILE_LAB_OOC_SHARE", "0.6"))


def _batches(vocab: int, batch: int, seq_len: int, count: int):
    ids = np.random.default_rng(0).integers(0, vocab, (count, batch, seq_len + 1))
    return [(b[:, :-1], b[:, 1:]) for b in ids]


def _capped_steps(trainer, spec, cap):
    """One step of the tiny model first (libraries load and warm up outside the cap), then
    the cap starts and the spec's model is built and timed: (model, optimizer, times)."""
    _, _, step = trainer(_tiny(spec))
    step(0)
    del step
    cap.start()
    model, opt, step = trainer(spec)
    return model, opt, timed_steps(step, spec.warmup_steps, spec.measure_steps)


def _tiny(spec):
    """A one-layer member of the same shape of model: one step of it loads what each system
    loads lazily (BLAS buffers, oneDNN kernels) before the cap's baseline is taken."""
    return spec.replace(n_layer=1, n_head=1, n_embd=64, n_inner=256, vocab_size=256,
                        head_tile=1, inner_tile=256, vocab_tile=256)


def _nntile(spec, cap, traffic: dict | None = None, finish=None) -> tuple[list, dict]:
    """The trainer's step on ``spec`` (``experiment``: model, optimizer, schedule, clipping).
    With OpenCL workers each op runs on the device where it has an OpenCL implementation,
    and ``traffic`` gets the bytes and transfers per bus per measured step. ``finish(times,
    static)`` is called before the runtime stops (the point's results, kept should StarPU
    abort in its shutdown)."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.trace.recorder import tensor_bytes
    device = bool(spec.nopencl)   # StarPU counts bus transfers only while profiling
    with experiment.runtime(spec, profiling=device) as rt, \
            (rt.on("opencl", fallback="cpu") if device else rt.on("any")):
        def trainer(spec):
            model, opt, schedule = experiment.build(spec)
            step = experiment.step_function(spec, rt, model, opt, schedule,
                                            experiment.RandomTokens(spec.vocab_size))

            def counted(k):   # the bus counters from the first measured step on
                if k == spec.warmup_steps:
                    rt.bus_traffic()
                step(k)
            return model, opt, counted

        model, opt, times = _capped_steps(trainer, spec, cap)
        if device and traffic is not None:
            n = spec.measure_steps
            traffic["buses"] = [b | {"bytes_per_step": b["bytes"] / n,
                                     "transfers_per_step": b["transfers"] / n}
                                for b in rt.bus_traffic()]
        state = [t for slot in opt.state.values() for t in slot.values()]
        # parameters: the float32 master weights and, under bf16, the GEMMs' bf16 copies
        weights = [*model.params.values(), *getattr(model, "params16", {}).values()]
        static = {"parameters": tensor_bytes(weights),
                  "gradients": tensor_bytes(model.grads.values()),
                  "optimizer state": tensor_bytes(state)}
        if finish is not None:
            finish(times, static)
        return times, static


def _torch(spec, cap, precision: str, compiled: bool = False) -> tuple[list, dict]:
    """The strongest PyTorch CPU baseline (``bench.torch_baseline``'s: nanoGPT with scaled
    dot-product attention for GPT-2, the fast PyTorch Llama for a Llama, the faster AdamW
    implementation, clipping at 1.0) on the same config, batches and cores (all of them), in
    ``precision`` (fp32 or bf16 autocast), eager
    or (``compiled``) its forward and loss under ``torch.compile`` (compiled in the warm-up
    steps, inside the cap)."""
    # torch and the PyTorch models: optional heavy dependencies, loaded where they are used
    import torch

    from nntile_lab.reference.autocast import autocast
    torch.set_num_threads(spec.ncpu or len(os.sched_getaffinity(0)))

    def trainer(spec):
        cfg, steps = spec.model_config(), spec.warmup_steps + spec.measure_steps
        _, model = torch_model(cfg)   # the model's PyTorch twin (float32)
        impl = pick_adamw(model)
        opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95),
                                weight_decay=spec.weight_decay_resolved, **{impl: True})
        batches = iter([tuple(torch.as_tensor(a) for a in b) for b in
                        _batches(cfg.vocab_size, spec.batch, spec.seq_len, steps)])
        loss_fn = torch.compile(model.loss_tensor) if compiled else model.loss_tensor

        def step(k):
            model.zero_grad(set_to_none=True)
            # bf16 autocast: matmuls in bf16, fp32 master weights and Adam state (FSDP bf16's)
            with autocast(precision):
                loss = loss_fn(*next(batches))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip, foreach=True)
            opt.step()
        return model, opt, step

    model, opt, times = _capped_steps(trainer, spec, cap)
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
    static = {"parameters": nbytes(model.parameters()),
              "gradients": nbytes(p.grad for p in model.parameters() if p.grad is not None),
              "optimizer state": nbytes(v for s in opt.state.values() for v in s.values()
                                        if torch.is_tensor(v) and v.dim() > 0)}
    return times, static


def measure_point(spec, ctx) -> dict:
    """Train ``spec`` (a family member in its series' precision) for its warm-up and
    measured steps as ``ctx.options["system"]`` (a series of ``figures.family.SYSTEMS``):
    step times, model GFLOP/s, peak and memory by category. ``out_of_core``: nntile_lab
    with StarPU's tiles under a share of the cap and a disk node in a temporary folder;
    ``compiled``: PyTorch under ``torch.compile``. Over the cap: ``engine.memcap``'s
    MemoryError (the point's status "oom")."""
    system = ctx.options["system"]
    out_of_core, compiled = ctx.options.get("out_of_core"), ctx.options.get("compiled")
    cap = ctx.cap
    flops = spec.flops_per_step()
    result = {"system": system, "precision": PRECISION[system], "n_layer": spec.n_layer,
              "n_embd": spec.n_embd, "flops_per_step": flops, "out_of_core": bool(out_of_core),
              "spec": spec.to_dict()}
    if not is_nntile(system):
        result["torch_mode"] = "compiled" if compiled else "eager"
    ctx.partial.update(result)   # what an "oom" record keeps

    def whole(times, static) -> dict:
        peak = cap.check()   # over between two samples: over is over (MemoryError)
        med = statistics.median(times)
        return result | {
            "gflops": flops / med / 1e9, "step_time_s": med,
            "step_time_spread_s": max(times) - min(times), "step_times_s": times,
            "tokens_per_s": spec.tokens_per_step() / med, "peak_mb": peak / MIB,
            # what the run held above its start beyond the three static categories:
            # activations, temporaries and the allocator's slack, measured the same way
            # for both systems
            "memory": static | {"activations": max(0, peak - sum(static.values()))}}

    def finish(times, static) -> None:   # before StarPU stops: kept through an abort there
        ctx.finished(whole(times, static))

    if system == "nntile_lab_device":   # the cap is the device's (in the spec); RAM measured
        times, static = _nntile(spec, cap, result, finish)
    elif is_nntile(system):
        with tempfile.TemporaryDirectory(prefix="nntile_lab_ooc_") as d:
            if out_of_core:   # StarPU's tiles get a share of the cap; the rest is for what
                # StarPU does not allocate (Python, BLAS buffers, the batches)
                if cap.cap is None:
                    raise ValueError("out_of_core needs the point's memory cap "
                                     "(caps.memory_mb): StarPU's tiles get a share of it")
                spec = spec.replace(memory_limit_mb=int(cap.cap / MIB * OOC_TILE_SHARE),
                                    ooc_dir=d)
                result["spec"] = spec.to_dict() | {"ooc_dir": "(a temporary directory)"}
                ctx.partial.update(result)
            times, static = _nntile(spec, cap, finish=finish)
    else:
        times, static = _torch(spec, cap, PRECISION[system], compiled)
    return whole(times, static)
