"""``nntile-lab bench kernels``: every codelet's C kernel against a roofline measured in
the same run.

Each row of the codelet table (``kernels/codelets.py``) is run on a tile of the main
job's sizes (the spec's defaults, ``nntile_lab.spec.DEFAULTS``: batch tile × sequence
tokens, n_embd, the inner tile, the vocabulary tile, a head tile of n_embd / n_head wide
heads; ``--config big``: n_embd 1024 in 16 heads, seq 256, batch tile 4, inner tile 1024).
The element-wise family's cases come from the table too: every op generated from it runs
on a tile of its row's ``width`` with its Python defaults. Timing is done in C
(``kernels/bench.c``: the kernel function called back to back, one thread — one StarPU
worker runs one task — without the few µs a task costs the runtime), median and min–max
over ``repeats`` repeats of ≥ 2 ms each. Beside the wall time, the thread's CPU time over
the same calls: on a shared machine the wall time also counts the time other processes
had the core, the more so the longer a call (a 40 ms GEMM is preempted, a 0.5 ms one
seldom), so there the CPU-time figures (``time_us_cpu``, ``gflops_cpu``) are the
kernel's and ``on_cpu`` (CPU time / wall time) says how shared the core was.

The roof of a kernel is the shortest time its work can take on one core, the largest of
  * bytes / bandwidth: bytes = what it reads plus what it writes (an RW tile twice, no
    write-allocate traffic, as STREAM counts), bandwidth = a STREAM triad on one core over
    the same footprint (so a tile that stays in L2 is held to L2's bandwidth, a tile of
    16 MB to DRAM's), timed in this run;
  * flops / the one-thread sgemm rate (the table's flops formula; gemm is compute-bound);
  * exps / the exp rate: the kernels' exp (fastexp.h) hand-vectorised on 8 lanes, timed in
    this run — the compute roof of kernels that sit on exp (GELU, softmax, cross-entropy).
fraction of roof = roof time / measured median time; rows below 0.5 are flagged. The roofs
are best-of-repeats (what the core can do; other users' work on a shared machine only
slows a repeat down), the kernels' median and best are both reported.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import statistics

import ml_dtypes
import numpy as np

from nntile_lab.bench.common import machine
from nntile_lab.spec import DEFAULTS, ExperimentSpec


def tile_dims(spec: ExperimentSpec) -> dict:
    """The sizes of one tile of each kind in the run ``spec`` describes."""
    seq = spec.seq_tile or spec.seq_len
    return dict(tokens=spec.batch_tile * seq, embd=spec.embd_tile or spec.n_embd,
                inner=spec.inner_tile or spec.inner, vocab_tile=spec.vocab_tile or spec.vocab_size,
                vocab=spec.vocab_size, batch_tile=spec.batch_tile, seq=seq,
                heads=spec.head_tile or spec.n_head, head_size=spec.n_embd // spec.n_head)


# sizes of a tile in the main job and in a bigger one (GPT-2 medium's width and heads)
CONFIGS = {
    "main": tile_dims(DEFAULTS),
    "big": tile_dims(DEFAULTS.replace(n_embd=1024, n_head=16, seq_len=256, batch_tile=4,
                                      inner_tile=1024)),
}
TARGET = 0.5            # fraction of roof every non-GEMM kernel should reach
MIN_REPEAT_S = 2e-3     # each timed repeat runs the kernel at least this long
F32, I64 = 4, 8


@dataclasses.dataclass
class Case:
    """One benchmarked call: the op, its scalar arguments, each buffer's element count,
    how to fill buffers whose values matter, exps per call, and a byte count where the
    kernel touches less than its whole buffers."""
    name: str
    args: dict
    sizes: dict
    init: dict = dataclasses.field(default_factory=dict)
    exps: int = 0
    bytes: int | None = None
    elements: int | None = None     # per-element figures are per this many (default: largest)


# buffer fillers for the cases whose values matter (n values each)
def _ones(n):           # a multiplier of 1: repeated in-place calls keep the values
    return np.ones(n, np.float32)


def _positive(n):       # variances, sums, probabilities: in [0.5, 1.5)
    return np.float32(0.5) + np.random.default_rng(1).random(n, np.float32)


def _ce_stats(n):       # (max, sum hi, sum lo, picked) per token, as cross_entropy_stats writes
    return np.tile(np.float32([4.0, 100.0, 0.0, 1.0]), n // 4)


def _ids(hi):           # token ids / labels in [0, hi)
    return lambda n: np.random.default_rng(2).integers(0, hi, n)


def elementwise_cases(d: dict) -> list[Case]:
    """A case per element-wise op generated from the codelet table: every buffer a tile
    of the row's width (the residual stream's or the MLP's), the scalars at the op's
    defaults (1.0 where it has none), the exps of the row's formula."""
    # the ops load the compiled extension: importing this module must not (--help, readers)
    from nntile_lab import ops
    from nntile_lab.ops._generated import OPS
    out = []
    for op in OPS.values():
        n = d["tokens"] * d[op.width]
        params = inspect.signature(getattr(ops, op.name)).parameters
        args = {"n": n, **{s: (1.0 if params[s].default is inspect.Parameter.empty
                                else params[s].default) for s in op.scalars}}
        exps = int(eval(op.exps, {"__builtins__": {}}, args))   # the table's formula
        out.append(Case(op.row, args, dict.fromkeys((*op.inputs, op.output), n), exps=exps))
    return out


def cases(d: dict) -> list[Case]:
    """One case per codelet, at the sizes of config ``d`` (see CONFIGS)."""
    t, e, h, vt = d["tokens"], d["embd"], d["inner"], d["vocab_tile"]
    act = t * e                                   # an activation tile
    sm_m, sm_k = d["batch_tile"] * d["heads"] * d["seq"], d["seq"]   # attention scores
    sm = sm_m * sm_k
    hd = d["heads"] * d["head_size"]             # a head tile's width
    ln = dict(m=t, k=e, n=1)                       # layer norm and biases along n_embd
    ln_stats = {"mean": lambda n: np.zeros(n, np.float32), "inv_std": _positive}
    rms = {"inv_rms": _positive}
    half = d["head_size"] // 2                   # rotary positions turn pairs of a head
    q = d["batch_tile"] * d["heads"] * d["seq"] * 2 * half     # a (B, H, T, D) head tile
    emb = dict(n=t, e=e, voff=0, vrows=vt, vocab=d["vocab"], check=0)
    return elementwise_cases(d) + [
        Case("fill", dict(n=act, value=1.0), {"y": act}),
        Case("fill_i64", dict(n=t, value=3), {"y": t}),
        # drop_grads' zeroing: a fill whose first buffer only orders the task
        Case("fill_after", dict(n=act, value=0.0), {"after": 1, "y": act}),
        Case("copy", dict(n=act), {"x": act, "y": act}),
        Case("copy_i64", dict(n=t), {"x": t, "y": t}),
        Case("sum_slice", dict(**ln, alpha=1.0, beta=0.0), {"x": act, "s": t}),
        Case("sumsq_slice", dict(**ln, alpha=1.0, beta=0.0), {"x": act, "s": t}),
        Case("sumprod_slice", dict(**ln, alpha=1.0, beta=0.0), {"a": act, "b": act, "s": t}),
        Case("max_slice", dict(m=sm_m, k=sm_k, n=1, accumulate=0), {"x": sm, "s": sm_m}),
        Case("sum_fiber", dict(**ln, alpha=1.0, beta=0.0), {"x": act, "f": e}),
        Case("sumsq_all", dict(n=act, alpha=1.0, beta=0.0), {"x": act, "s": 1}),
        Case("add_slice", dict(**ln, alpha=1.0, beta=1.0), {"s": t, "x": act}),
        Case("mul_slice", dict(**ln), {"s": t, "x": act}, init={"s": _ones}),
        Case("add_fiber", dict(**ln, alpha=1.0, beta=1.0), {"f": e, "x": act}),
        Case("mul_fiber", dict(**ln), {"f": e, "x": act}, init={"f": _ones}),
        Case("softmax_sumexp", dict(m=sm_m, k=sm_k, n=1, beta=0.0),
             {"x": sm, "mx": sm_m, "s": sm_m}, exps=sm),
        Case("softmax_apply", dict(m=sm_m, k=sm_k, n=1),
             {"x": sm, "mx": sm_m, "s": sm_m, "y": sm}, init={"s": _positive}, exps=sm),
        Case("softmax_tile", dict(m=sm_m, k=sm_k, n=1), {"x": sm, "y": sm}, exps=sm),
        Case("softmax_backward_sums", dict(m=sm_m, k=sm_k, n=1, accumulate=0),
             {"y": sm, "dy": sm, "sums": 4 * sm_m}),
        Case("softmax_backward", dict(m=sm_m, k=sm_k, n=1, beta=0.0),
             {"y": sm, "dy": sm, "sums": 4 * sm_m, "dx": sm}, init={"sums": _positive}),
        Case("softmax_backward_tile", dict(m=sm_m, k=sm_k, n=1, beta=0.0),
             {"y": sm, "dy": sm, "dx": sm}, init={"y": _positive}),
        Case("layer_norm_invstd", dict(**ln, alpha=1.0 / e, beta=0.0, eps=1e-5, finish=1),
             {"x": act, "mean": t, "s": t}),
        Case("layer_norm_apply", dict(**ln), {"x": act, "mean": t, "inv_std": t, "gamma": e,
                                              "bias": e, "y": act}, init=ln_stats),
        Case("layer_norm_tile", dict(**ln, eps=1e-5), {"x": act, "gamma": e, "bias": e,
                                                       "y": act, "mean": t, "inv_std": t}),
        Case("layer_norm_backward_sums", dict(**ln, alpha=1.0 / e, beta=0.0),
             {"x": act, "dy": act, "gamma": e, "mean": t, "inv_std": t, "sums": 2 * t},
             init=ln_stats),
        Case("layer_norm_backward_dx", dict(**ln, beta=0.0),
             {"x": act, "dy": act, "gamma": e, "mean": t, "inv_std": t, "sums": 2 * t,
              "dx": act}, init=ln_stats),
        Case("layer_norm_backward_tile", dict(**ln, beta=0.0),
             {"x": act, "dy": act, "gamma": e, "mean": t, "inv_std": t, "dx": act},
             init=ln_stats),
        Case("layer_norm_backward_fiber", dict(**ln, beta_gamma=0.0, beta_bias=0.0),
             {"x": act, "dy": act, "mean": t, "inv_std": t, "dgamma": e, "dbias": e},
             init=ln_stats),
        # Llama's RMS norm along n_embd, its backward, and SwiGLU's gate on an MLP tile
        Case("rms_norm_invrms", dict(**ln, alpha=1.0 / e, beta=0.0, eps=1e-6, finish=1),
             {"x": act, "s": t}),
        Case("rms_norm_apply", dict(**ln), {"x": act, "inv_rms": t, "w": e, "y": act},
             init=rms),
        Case("rms_norm_tile", dict(**ln, eps=1e-6), {"x": act, "w": e, "y": act, "inv_rms": t}),
        Case("rms_norm_backward_sums", dict(**ln, alpha=1.0 / e, beta=0.0),
             {"x": act, "dy": act, "w": e, "inv_rms": t, "sums": t}, init=rms),
        Case("rms_norm_backward_dx", dict(**ln, beta=0.0),
             {"x": act, "dy": act, "w": e, "inv_rms": t, "sums": t, "dx": act}, init=rms),
        Case("rms_norm_backward_tile", dict(**ln, beta=0.0),
             {"x": act, "dy": act, "w": e, "inv_rms": t, "dx": act}, init=rms),
        Case("rms_norm_backward_fiber", dict(**ln, beta=0.0),
             {"x": act, "dy": act, "inv_rms": t, "dw": e}, init=rms),
        Case("silu_gate_backward", dict(n=t * h, beta=0.0),
             {"g": t * h, "u": t * h, "dy": t * h, "dg": t * h, "du": t * h}, exps=t * h),
        # the same under the bf16 modes: the kept inputs (and the output) in bf16
        Case("silu_gate_bf16", dict(n=t * h),
             {"g": t * h, "u": t * h, "gk": t * h, "uk": t * h, "out": t * h}, exps=t * h),
        Case("silu_gate_backward_bf16", dict(n=t * h, beta=0.0),
             {"g": t * h, "u": t * h, "dy": t * h, "dg": t * h, "du": t * h}, exps=t * h),
        # rotary positions on a head tile of queries: (batch tile · heads) rows of seq tokens
        Case("rope", dict(m=d["batch_tile"] * d["heads"], k=d["seq"], n=half),
             {"x": q, "cos_t": d["seq"] * half, "sin_t": d["seq"] * half, "y": q}),
        Case("rope_backward", dict(m=d["batch_tile"] * d["heads"], k=d["seq"], n=half),
             {"dy": q, "cos_t": d["seq"] * half, "sin_t": d["seq"] * half, "dx": q}),
        # the MLP's first product: (tokens × n_embd) · (n_embd × inner tile)
        Case("gemm", dict(batch=1, m=t, n=h, k=e, trans_a=0, trans_b=0, alpha=1.0, beta=0.0),
             {"a": t * e, "b": e * h, "c": t * h}),
        # bf16: an activation tile converted each way, and the MLP's first product in bf16
        Case("f32_to_bf16", dict(n=act), {"x": act, "y": act}),
        Case("bf16_to_f32", dict(n=act), {"x": act, "y": act}),
        Case("gemm_bf16", dict(batch=1, m=t, n=h, k=e, trans_a=0, trans_b=0, alpha=1.0,
                               beta=0.0), {"a": t * e, "b": e * h, "c": t * h}),
        # the bf16 modes' logits: the head's product (tokens × n_embd)·(vocab tile × n_embd)ᵀ
        # stored in bf16, from bf16 operands (bf16) and from float32 ones (bf16-storage)
        Case("gemm_bf16_c16", dict(batch=1, m=t, n=vt, k=e, trans_a=0, trans_b=1, alpha=1.0),
             {"a": t * e, "b": vt * e, "c": t * vt}),
        Case("gemm_c16", dict(batch=1, m=t, n=vt, k=e, trans_a=0, trans_b=1, alpha=1.0),
             {"a": t * e, "b": vt * e, "c": t * vt}),
        # bf16-storage's head backward: the bf16 logits' gradient tile times wte's (float32)
        Case("gemm_a16", dict(batch=1, m=t, n=e, k=vt, trans_a=0, trans_b=0, alpha=1.0,
                              beta=0.0), {"a": t * vt, "b": vt * e, "c": t * e}),
        # the bf16 modes' GELU on an MLP tile (bf16 storage in, out or both)
        Case("gelu_bf16", dict(n=t * h), {"x": t * h, "xk": t * h, "out": t * h}, exps=t * h),
        Case("gelu_backward_bf16", dict(n=t * h, beta=0.0), {"x": t * h, "dy": t * h,
                                                             "dx": t * h}, exps=t * h),
        # every id in the vocabulary tile: each token copies (adds) one row of e values
        Case("embedding", emb, {"ids": t, "table": vt * e, "out": act}, init={"ids": _ids(vt)},
             bytes=t * I64 + 2 * act * F32, elements=act),
        Case("embedding_backward", emb, {"ids": t, "dout": act, "dtable": vt * e},
             init={"ids": _ids(vt)}, bytes=t * I64 + 3 * act * F32, elements=act),
        Case("cross_entropy_stats", dict(n=t, vt=vt, voff=0, vocab=d["vocab"]),
             {"x": t * vt, "labels": t, "stats": 4 * t}, init={"labels": _ids(vt)},
             exps=t * vt),
        Case("cross_entropy_merge", dict(n=t), {"stats": 4 * t, "part": 4 * t},
             init={"stats": _ce_stats, "part": _ce_stats}),
        Case("cross_entropy_loss", dict(n=t, scale=1.0 / t, first=1), {"stats": 4 * t,
                                                                       "loss": 1},
             init={"stats": _ce_stats}),
        Case("cross_entropy_backward", dict(n=t, vt=vt, voff=0, scale=1.0 / t),
             {"x": t * vt, "labels": t, "stats": 4 * t, "dx": t * vt},
             init={"labels": _ids(vt), "stats": _ce_stats}, exps=t * vt),
        # the same from bf16 logits (the bf16 modes), the gradient written in bf16
        Case("cross_entropy_stats_bf16", dict(n=t, vt=vt, voff=0, vocab=d["vocab"]),
             {"x": t * vt, "labels": t, "stats": 4 * t}, init={"labels": _ids(vt)},
             exps=t * vt),
        Case("cross_entropy_backward_bf16", dict(n=t, vt=vt, voff=0, scale=1.0 / t),
             {"x": t * vt, "labels": t, "stats": 4 * t, "dx": t * vt},
             init={"labels": _ids(vt), "stats": _ce_stats}, exps=t * vt),
        Case("adamw", dict(n=act, beta1=0.9, beta2=0.999, one_m_beta1=0.1, one_m_beta2=0.001,
                           step_size=1e-3, inv_bc2_sqrt=1.0, eps=1e-8, decay=0.9999, l2=0.0,
                           grad_scale=1.0), {"p": act, "g": act, "m": act, "v": act},
             init={"v": _positive}),
        Case("sgd", dict(n=act, lr=1e-3, wd=0.0, grad_scale=1.0), {"p": act, "g": act}),
        Case("sgd_momentum", dict(n=act, lr=1e-3, wd=0.0, momentum=0.9, one_m_dampening=1.0,
                                  nesterov=0, first=0, grad_scale=1.0),
             {"p": act, "g": act, "buf": act}),
        # scores of a (batch tile, heads) block: writes the upper triangle, reads nothing
        Case("mask_causal", dict(batch=sm_m // sm_k, m=sm_k, n=sm_k, row0=0, col0=0,
                                 value=-math.inf), {"x": sm}, bytes=sm * F32 // 2, elements=sm),
        # (B, T, H, D) → (B, H, T, D) for one batch and head tile, axes padded in front
        # as ops.permute pads them
        Case("permute", dict(n0=1, n1=1, n2=d["batch_tile"], n3=d["heads"], n4=d["seq"],
                             n5=d["head_size"], s0=0, s1=0, s2=d["seq"] * hd, s3=d["head_size"],
                             s4=hd, s5=1), {"x": t * hd, "y": t * hd}),
    ]


def table() -> list[dict]:
    """The compiled codelet table: per op, its name, buffers (mode, dtype, name), scalar
    arguments (type, name) and flops formula, as the extension was built."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import ffi, lib
    rows = []
    for i in range(lib.nl_op_count()):
        buffers, args, flops = ffi.string(lib.nl_op_signature(i)).decode().split("|")
        bufs = []
        for item in buffers.split(","):
            mode, name = item.split()
            mode, _, dtype = mode.partition(":")
            bufs.append((mode, dtype or "f32", name))
        rows.append({"op": i, "name": ffi.string(lib.nl_op_name(i)).decode(), "buffers": bufs,
                     "args": [tuple(a.split()) for a in args.split(",")], "flops": flops})
    return rows


def roof_time(nbytes: float, flops: float, exps: float, roofs: dict) -> tuple[float, str]:
    """The shortest time (s) the work can take and what bounds it: memory (bytes at the
    bandwidth ``roofs["gbs"]``), compute (flops at ``roofs["gflops"]``) or exp (exps at
    ``roofs["gexps"]``, 1e9 exps/s)."""
    limits = {"memory": nbytes / (roofs["gbs"] * 1e9), "compute": flops / (roofs["gflops"] * 1e9),
              "exp": exps / (roofs["gexps"] * 1e9) if exps else 0.0}
    bound = max(limits, key=limits.get)
    return limits[bound], bound


def _time(fn, repeats: int) -> dict:
    """fn(calls) → seconds; per-call seconds: median, min, max over repeats of ≥ 2 ms."""
    one = max(fn(1), 1e-9)                          # also the warm-up
    calls = max(1, min(1_000_000, math.ceil(MIN_REPEAT_S / one)))
    per_call = [fn(calls) / calls for _ in range(repeats)]
    if min(per_call) < 0:
        raise RuntimeError("the kernel benchmark called an unknown op")
    return {"median": statistics.median(per_call), "min": min(per_call), "max": max(per_call),
            "calls": calls}


def _time_op(op: int, ptrs, args, repeats: int) -> dict:
    """``_time`` of the op's direct calls, with their thread CPU time: ``cpu_median`` per
    call, and ``on_cpu``, the share of the wall time the thread ran (all repeats)."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import ffi, lib
    cpu = ffi.new("double *")
    runs = []

    def fn(calls):
        wall = lib.nl_time_op_cpu(op, ptrs, args, calls, cpu)
        runs.append((wall, cpu[0], calls))
        return wall
    t = _time(fn, repeats)
    timed = runs[1:]                                 # runs[0]: _time's warm-up call
    t["cpu_median"] = statistics.median(c / n for _, c, n in timed)
    t["on_cpu"] = sum(c for _, c, _ in timed) / sum(w for w, _, _ in timed)
    return t


def stream(nbytes: int, repeats: int, kind: int = 1) -> float:
    """GB/s of a one-core STREAM copy (kind 0, 8 B per element) or triad (kind 1, 12 B)
    whose arrays total ``nbytes``, best of ``repeats``."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import ffi, lib
    per = 8 if kind == 0 else 12
    n = max(64, nbytes // per)
    a, b, c = (np.full(n, v, np.float32) for v in (0.0, 1.0, 2.0))
    pa, pb, pc = (ffi.cast("float *", x.ctypes.data) for x in (a, b, c))
    t = _time(lambda calls: lib.nl_time_stream(kind, n, pa, pb, pc, calls), repeats)
    return per * n / t["min"] / 1e9


def exp_rate(repeats: int, n: int = 4096) -> float:
    """Exps per ns (1e9/s) of the 8-lane exp, on an L1-resident array, best of ``repeats``."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import ffi, lib
    x = np.linspace(-20, 20, n, dtype=np.float32)
    y = np.empty_like(x)
    px, py = ffi.cast("float *", x.ctypes.data), ffi.cast("float *", y.ctypes.data)
    return n / _time(lambda calls: lib.nl_time_vexp(n, px, py, calls), repeats)["min"] / 1e9


def _buffers(case: Case, row: dict, rng) -> list[np.ndarray]:
    out = []
    for _, dtype, name in row["buffers"]:
        n = case.sizes[name]
        if name in case.init:
            arr = np.ascontiguousarray(case.init[name](n))
        elif dtype == "i64":
            arr = np.zeros(n, np.int64)
        else:
            arr = rng.standard_normal(n, dtype=np.float32)
        want = {"i64": np.int64, "bf16": ml_dtypes.bfloat16}.get(dtype, np.float32)
        arr = arr.astype(want, copy=False)
        if arr.shape != (n,):
            raise ValueError(f"{case.name}: buffer {name} has {arr.size} values, not {n}")
        out.append(arr)
    return out


def measure_case(case: Case, row: dict, roofs: dict, repeats: int, stream_cache: dict) -> dict:
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import ffi
    bufs = _buffers(case, row, np.random.default_rng(0))
    ptrs = ffi.new("void *[]", [ffi.cast("void *", b.ctypes.data) for b in bufs])
    args = ffi.new("double[]", [float(case.args[name]) for _, name in row["args"]])
    t = _time_op(row["op"], ptrs, args, repeats)
    footprint = sum(b.nbytes for b in bufs)
    nbytes = case.bytes if case.bytes is not None else sum(
        b.nbytes * (2 if mode.startswith("RW") else 1)
        for (mode, _, _), b in zip(row["buffers"], bufs))
    flops = float(eval(row["flops"], {"__builtins__": {}}, dict(case.args)))  # table's formula
    if footprint not in stream_cache:
        stream_cache[footprint] = stream(footprint, repeats)
    kroofs = dict(roofs, gbs=stream_cache[footprint])
    roof, bound = roof_time(nbytes, flops, case.exps, kroofs)
    elements = case.elements or max(b.size for b in bufs)
    med, cpu = t["median"], t["cpu_median"]
    return {"name": case.name, "args": case.args, "elements": elements, "bytes": nbytes,
            "footprint_bytes": footprint, "flops": flops, "exps": case.exps,
            "time_us": med * 1e6, "time_us_min": t["min"] * 1e6, "time_us_max": t["max"] * 1e6,
            "calls_per_repeat": t["calls"], "ns_per_element": med * 1e9 / elements,
            "gbs": nbytes / med / 1e9, "gflops": flops / med / 1e9,
            "roof_gbs": kroofs["gbs"], "roof_us": roof * 1e6, "bound": bound,
            "fraction": roof / med, "fraction_best": roof / t["min"],
            "time_us_cpu": cpu * 1e6, "gflops_cpu": flops / cpu / 1e9, "on_cpu": t["on_cpu"],
            "below_target": roof / med < TARGET}


def run(config: str = "main", repeats: int = 7, only: list[str] | None = None) -> dict:
    """Every codelet of the compiled table (or ``only`` those) timed against the roofs."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab._lib import VARIANT, ffi, lib
    rows = {r["name"]: r for r in table()}
    by_name = {c.name: c for c in cases(CONFIGS[config])}
    missing = sorted(set(rows) - set(by_name))
    if missing:
        raise RuntimeError(f"bench kernels has no case for codelet(s) {', '.join(missing)}")
    # the roofs, in this run: one-thread sgemm (N = 1024), STREAM, exp rate
    gemm = rows["gemm"]
    n = 1024
    sq = [np.random.default_rng(0).standard_normal(n * n, dtype=np.float32) for _ in range(3)]
    ptrs = ffi.new("void *[]", [ffi.cast("void *", b.ctypes.data) for b in sq])
    gargs = ffi.new("double[]", [1, n, n, n, 0, 0, 1.0, 0.0])
    tg = _time(lambda calls: lib.nl_time_op(gemm["op"], ptrs, gargs, calls), repeats)
    roofs = {"gflops": 2.0 * n**3 / tg["min"] / 1e9, "gexps": exp_rate(repeats),
             "stream_triad_gbs_dram": stream(3 << 26, repeats),      # 3 × 64 MiB
             "stream_copy_gbs_dram": stream(2 << 26, repeats, kind=0),
             "stream_triad_gbs_l2": stream(3 << 18, repeats)}         # 3 × 256 KiB
    stream_cache: dict = {}
    kernels = [measure_case(by_name[name], rows[name], roofs, repeats, stream_cache)
               for name in rows if not only or name in only]
    return {"config": config, "dims": CONFIGS[config], "repeats": repeats,
            "build_isa": ffi.string(lib.nl_build_isa()).decode(),
            "cflags": ffi.string(lib.nl_build_cflags()).decode(),   # as built, not as now
            "variant": VARIANT,   # which build ran (nntile_lab.cpu_variant)
            "machine": machine(),
            "roofs": {"sgemm_gflops_1thread": roofs["gflops"], "exp_gexps_8lanes": roofs["gexps"],
                      **{k: v for k, v in roofs.items() if k.startswith("stream")}},
            "kernels": kernels,
            "below_target": [k["name"] for k in kernels if k["below_target"]
                             and not k["name"].startswith("gemm")]}


def report(res: dict) -> str:
    m, r = res["machine"], res["roofs"]
    lines = [f"kernels of {res['config']} tiles {res['dims']} on {m['cpu']} "
             f"({', '.join(m['isa'])}), kernels: variant {res['variant']} built for "
             f"{res['build_isa']} ({res['cflags']}), {m['date']}, median of {res['repeats']}",
             f"roofs, one core: sgemm {r['sgemm_gflops_1thread']:.1f} GFLOP/s, exp "
             f"{r['exp_gexps_8lanes']:.2f} G/s (8 lanes), STREAM triad "
             f"{r['stream_triad_gbs_dram']:.1f} GB/s (DRAM) {r['stream_triad_gbs_l2']:.1f} GB/s "
             f"(L2), copy {r['stream_copy_gbs_dram']:.1f} GB/s (DRAM); per kernel the triad "
             "over its own footprint", "",
             f"{'kernel':<26}{'µs':>9}{'min–max':>16}{'ns/elem':>9}{'GB/s':>8}{'GFLOP/s':>9}"
             f"{'roof GB/s':>10}{'bound':>9}{'of roof':>9}{'(best)':>8}{'CPU µs':>9}"
             f"{'on CPU':>7}"]
    for k in res["kernels"]:
        flag = "  <-- below 50 %" if k["below_target"] else ""
        lines.append(f"{k['name']:<26}{k['time_us']:>9.1f}{k['time_us_min']:>8.1f}–"
                     f"{k['time_us_max']:<7.1f}{k['ns_per_element']:>9.3f}"
                     f"{k['gbs']:>8.1f}{k['gflops']:>9.1f}{k['roof_gbs']:>10.1f}{k['bound']:>9}"
                     f"{k['fraction']:>9.2f}{k['fraction_best']:>8.2f}"
                     f"{k['time_us_cpu']:>9.1f}{k['on_cpu']:>7.2f}{flag}")
    lines.append("")
    shared = min((k["on_cpu"] for k in res["kernels"]), default=1.0)
    if shared < 0.9:
        lines.append(f"the core was shared (a kernel ran {shared:.2f} of its wall time): the "
                     "CPU-time column is the kernel's, the wall-time ones are not")
    lines.append("below 50 % of roof (GEMM excepted): " + (", ".join(res["below_target"])
                                                           or "none"))
    return "\n".join(lines)
