"""Communication proxies of GPT-2, GPT-3, CosmoFlow and DLRM, derived from model configs.

dnn-distributed (vdutts7/dnn-distributed, from spcl/DNN-cpp-proxies) hard-codes its message
sizes; here every message of one training iteration comes from a config and a :class:`Layout`:

GPT (GPipe schedule, Megatron tensor parallelism, data-parallel buckets)
    pipeline p2p       micro_batch · seq_len · E floats, forward (activations) and backward
                       (their gradients), once per micro-batch between neighbouring stages
    tensor all-reduce  micro_batch · seq_len · E, twice per layer forward (after attention and
                       MLP, row-parallel outputs) and twice backward (column-parallel inputs)
    data all-reduce    the gradients: per parameter, per layer, per stage or in buckets of
                       N MiB, issued non-blocking as backward of the last micro-batch frees them;
                       sharded weights count 1/tensor (c_attn, c_fc, their biases, both
                       projections' weights, the vocabulary-parallel embedding)
CosmoFlow (3-D CNN; spatial decomposition over ``tensor`` = 2 or 2×2 shards, data replicas)
    halo               before conv i ≥ 1: batch · C_in · S · S/split · (k−1)/2 floats per
                       neighbour (the shard's face, one cell deep); backward the same for the
                       output gradient (C_out channels)
    dense              feature-sharded: allgather of batch · in/tensor before each dense layer,
                       reduce-scatter of the input gradient backward
    gradients          dense (sharded) over ``data``, each conv layer over ``world``
DLRM (embedding tables model-parallel over all ranks, MLPs data-parallel)
    all-to-all         global_batch · dim · tables_per_rank floats per rank, forward and backward
    all-reduce         bottom and top MLP gradients (non-blocking)

Compute is emulated: each kernel's time = its FLOPs / ``tflops`` (embedding lookups: bytes /
``mem_gbs``), so the replay reproduces overlap and pipeline bubbles.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from nntile_lab.proxies.program import (
    FLOAT_BYTES,
    P2P,
    Collective,
    Compute,
    Layout,
    Proxy,
    Wait,
    summarize,
)

MODELS = ("gpt2", "gpt3", "cosmoflow", "dlrm")


# ---------------------------------------------------------------- configs
@dataclass(frozen=True)
class Transformer:
    """GPT-2/GPT-3 shape: 12·E² weights per layer (4E inner), tied embeddings."""

    n_layer: int
    n_embd: int
    n_head: int
    vocab_size: int = 50257
    n_positions: int = 1024
    seq_len: int = 1024
    micro_batch: int = 1


@dataclass(frozen=True)
class CNN3D:
    """CosmoFlow: conv(k=3)+pool(2) blocks on a side³ volume, then dense layers."""

    side: int = 128
    in_channels: int = 4
    conv_channels: tuple = (32, 64, 128, 256, 512)
    kernel: int = 3
    dense: tuple = (128, 64, 4)
    micro_batch: int = 8       # samples per data replica (dnn-distributed: "batchsize = 8")


@dataclass(frozen=True)
class Recommender:
    """DLRM: bottom MLP on dense features, embedding tables, dot interaction, top MLP."""

    bottom: tuple = (128, 128, 128, 128)
    top: tuple = (512, 512, 512, 256, 1)   # the interaction's width is put in front
    tables: tuple = (80000,) * 4
    dim: int = 128
    global_batch: int = 2048


CONFIGS = {
    "gpt2": {"small": Transformer(12, 768, 12), "medium": Transformer(24, 1024, 16),
             "large": Transformer(36, 1280, 20), "xl": Transformer(48, 1600, 25)},
    "gpt3": {"small": Transformer(12, 768, 12, n_positions=2048, seq_len=2048),
             "6.7b": Transformer(32, 4096, 32, n_positions=2048, seq_len=2048),
             "175b": Transformer(96, 12288, 96, n_positions=2048, seq_len=2048)},
    "cosmoflow": {"reference": CNN3D()},
    # "reference": the command line in dnn-distributed's dlrm.cpp; "kaggle": DLRM's Criteo
    # Kaggle benchmark (13 dense features, 26 tables, dim 16, mini-batch 128)
    "dlrm": {"reference": Recommender(),
             "kaggle": Recommender(bottom=(13, 512, 256, 64, 16), top=(512, 256, 1),
                                   tables=(100000,) * 26, dim=16, global_batch=128)},
}
DEFAULT_CONFIG = {"gpt2": "large", "gpt3": "175b", "cosmoflow": "reference", "dlrm": "reference"}


def config(model: str, name: str | None = None):
    if model not in CONFIGS:
        raise ValueError(f"model {model!r}: choose one of {', '.join(MODELS)}")
    name = name or DEFAULT_CONFIG[model]
    if name not in CONFIGS[model]:
        raise ValueError(f"--config {name!r} for {model}: choose one of "
                         f"{', '.join(CONFIGS[model])}")
    return CONFIGS[model][name]


def build(model: str, config_name: str | None = None, *, data: int = 1, tensor: int = 1,
          pipeline: int = 1, seq_len: int | None = None, micro_batch: int | None = None,
          grad_accum: int | None = None, bucket: str = "param", tflops: float = 100.0,
          mem_gbs: float = 1500.0) -> Proxy:
    """The proxy of one training iteration of ``model`` (see the module docstring)."""
    cfg = config(model, config_name)
    name = config_name or DEFAULT_CONFIG[model]
    lay = Layout(data, tensor, pipeline)
    if tflops <= 0 or mem_gbs <= 0:
        raise ValueError(f"tflops={tflops}, mem_gbs={mem_gbs}: both must be > 0")
    if model in ("gpt2", "gpt3"):
        over = {k: v for k, v in (("seq_len", seq_len), ("micro_batch", micro_batch))
                if v is not None}
        cfg = replace(cfg, **over)
        return _gpt(model, name, cfg, lay, grad_accum or 1, bucket, tflops * 1e12)
    if seq_len is not None:
        raise ValueError(f"--seq-len is for gpt2/gpt3, not {model}")
    if grad_accum not in (None, 1):
        raise ValueError(f"--grad-accum is for gpt2/gpt3, not {model}")
    if micro_batch is not None:
        cfg = replace(cfg, **({"micro_batch": micro_batch} if model == "cosmoflow"
                              else {"global_batch": micro_batch * lay.world}))
    if model == "cosmoflow":
        return _cosmoflow(name, cfg, lay, tflops * 1e12)
    return _dlrm(name, cfg, lay, tflops * 1e12, mem_gbs * 1e9)


def _check_positive(**kw):
    for k, v in kw.items():
        if v < 1:
            raise ValueError(f"{k.replace('_', '-')}={v} (--{k.replace('_', '-')}) must be >= 1")


# ---------------------------------------------------------------- GPT
def gpt_parameters(cfg: Transformer, tensor: int = 1) -> dict:
    """Gradient sizes (floats) of one rank's parameters, grouped as the backward frees them.

    Returns {"embedding": [...], "block": [...], "head": [...]}: (name, floats) lists; sharded
    tensors divide by ``tensor`` (ceil), replicated ones (layer norms, row-parallel biases,
    positions) do not."""
    e, t = cfg.n_embd, tensor

    def shard(n):
        return -(-n // t)

    block = [("ln_1.weight", e), ("ln_1.bias", e),
             ("attn.c_attn.weight", shard(3 * e * e)), ("attn.c_attn.bias", shard(3 * e)),
             ("attn.c_proj.weight", shard(e * e)), ("attn.c_proj.bias", e),
             ("ln_2.weight", e), ("ln_2.bias", e),
             ("mlp.c_fc.weight", shard(4 * e * e)), ("mlp.c_fc.bias", shard(4 * e)),
             ("mlp.c_proj.weight", shard(4 * e * e)), ("mlp.c_proj.bias", e)]
    embedding = [("wte", shard(cfg.vocab_size * e)), ("wpe", cfg.n_positions * e)]
    head = [("ln_f.weight", e), ("ln_f.bias", e), ("lm_head (tied wte)", shard(cfg.vocab_size * e))]
    return {"embedding": embedding, "block": block, "head": head}


def _buckets(ready: list, bucket: str) -> list[list]:
    """Group gradients in the order backward frees them.

    ``ready`` holds (name, floats) items and "|" layer boundaries. bucket: "param" (one message
    per parameter), "layer", "stage" (one message at the end) or a size in MiB."""
    if bucket not in ("param", "layer", "stage"):
        try:
            limit = float(bucket) * 2**20 / FLOAT_BYTES
        except ValueError:
            raise ValueError(f"--bucket {bucket!r}: use param, layer, stage or a size in MiB"
                             ) from None
        if limit <= 0:
            raise ValueError(f"--bucket {bucket}: a size in MiB must be > 0")
    out, cur = [], []
    for item in ready:
        if item == "|":
            if bucket == "layer" and cur:
                out.append(cur)
                cur = []
            continue
        cur.append(item)
        if bucket == "param" or (bucket not in ("layer", "stage")
                                 and sum(n for _, n in cur) >= limit):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def _free_gradients(prog: list, done_at: dict, freed: int, k: int) -> int:
    """Backward freed ``k`` more gradients (``freed`` so far): append the non-blocking data
    all-reduce of every bucket that is now complete (``done_at``: count -> buckets); return
    the new count."""
    for _ in range(k):
        freed += 1
        for g in done_at.get(freed, []):
            lbl = (f"data all-reduce: {g[0][0]}" if len(g) == 1
                   else f"data all-reduce: bucket of {len(g)}")
            prog.append(Collective(lbl, "allreduce", sum(c for _, c in g), "data",
                                   blocking=False))
    return freed


def _gpt(model, name, cfg: Transformer, lay: Layout, accum, bucket, flops_s) -> Proxy:
    _check_positive(seq_len=cfg.seq_len, micro_batch=cfg.micro_batch, grad_accum=accum)
    if cfg.seq_len > cfg.n_positions:
        raise ValueError(f"--seq-len {cfg.seq_len} exceeds the config's n_positions "
                         f"{cfg.n_positions}")
    if cfg.n_layer % lay.pipeline:
        raise ValueError(f"--pipeline {lay.pipeline} must divide n_layer={cfg.n_layer}")
    if cfg.n_head % lay.tensor:
        raise ValueError(f"--tensor {lay.tensor} must divide n_head={cfg.n_head}")
    e, t, p = cfg.n_embd, lay.tensor, lay.pipeline
    act = cfg.micro_batch * cfg.seq_len * e
    tokens = cfg.micro_batch * cfg.seq_len
    layer_fwd = (2 * tokens * 12 * e * e + 4 * cfg.micro_batch * cfg.seq_len ** 2 * e) / t
    head_fwd = 2 * tokens * e * cfg.vocab_size / t
    params = gpt_parameters(cfg, t)
    per_stage = cfg.n_layer // p
    programs = {}
    for rank in range(lay.world):
        s, _, _ = lay.coords(rank)
        first, last = s == 0, s == p - 1
        prog = []
        for _ in range(accum):
            if not first:
                prog.append(P2P("pipeline activations", act, "pipeline", recvs=(s - 1,)))
            for _ in range(per_stage):
                prog.append(Compute("layer forward", layer_fwd / flops_s))
                if t > 1:
                    prog += [Collective("tensor all-reduce (forward)", "allreduce", act,
                                        "tensor")] * 2
            if last:
                prog.append(Compute("head forward", head_fwd / flops_s))
            else:
                prog.append(P2P("pipeline activations", act, "pipeline", sends=(s + 1,)))
        # gradients in the order backward frees them, on the last micro-batch
        ready = []
        if last:
            ready += list(reversed(params["head"])) + ["|"]
        for _ in range(per_stage):
            ready += list(reversed(params["block"])) + ["|"]
        if first:
            ready += list(reversed(params["embedding"])) + ["|"]
        groups = _buckets(ready, bucket) if lay.data > 1 else []
        # where each bucket is complete: after how many gradient items
        done_at, n = {}, 0
        for g in groups:
            n += len(g)
            done_at.setdefault(n, []).append(g)
        for mb in range(accum):
            final = mb == accum - 1
            if not last:
                prog.append(P2P("pipeline activation gradients", act, "pipeline",
                                recvs=(s + 1,)))
            freed = 0
            complete = done_at if final else {}   # gradients are reduced after the last one
            if last:
                prog.append(Compute("head backward", 2 * head_fwd / flops_s))
                freed = _free_gradients(prog, complete, freed, len(params["head"]))
            for _ in range(per_stage):
                half = 2 * layer_fwd / flops_s / 2
                nb = len(params["block"])
                # MLP half first (its gradients are freed first), then attention
                prog.append(Compute("layer backward (MLP)", half))
                if t > 1:
                    prog.append(Collective("tensor all-reduce (backward)", "allreduce", act,
                                           "tensor"))
                freed = _free_gradients(prog, complete, freed, nb // 2)
                prog.append(Compute("layer backward (attention)", half))
                if t > 1:
                    prog.append(Collective("tensor all-reduce (backward)", "allreduce", act,
                                           "tensor"))
                freed = _free_gradients(prog, complete, freed, nb - nb // 2)
            if first:
                freed = _free_gradients(prog, complete, freed, len(params["embedding"]))
            else:
                prog.append(P2P("pipeline activation gradients", act, "pipeline",
                                sends=(s - 1,)))
        if groups:
            prog.append(Wait())
        programs[rank] = _tag_p2p(prog)

    def describe(rank):
        return f"stage {lay.coords(rank)[0]}" if p > 1 else "all"
    n_params = (sum(c for _, c in params["block"]) * cfg.n_layer
                + sum(c for _, c in params["embedding"]) + 2 * e) * t
    notes = [f"GPipe schedule, {accum} micro-batch(es); gradients all-reduced on the last one"]
    if p > 1:
        notes.append("the tied embedding's gradient is all-reduced on the first and last stage "
                     "(the first↔last sync of Megatron is not modelled)")
    return Proxy(model, name, lay, summarize(programs, describe), programs, notes,
                {"n_layer": cfg.n_layer, "n_embd": e, "seq_len": cfg.seq_len,
                 "micro_batch": cfg.micro_batch, "grad_accum": accum, "bucket": bucket,
                 "parameters": n_params, "layer_forward_gflop": layer_fwd / 1e9})


def _tag_p2p(prog: list) -> list:
    """Give the k-th send and the k-th receive of one label and direction the same tag."""
    seen: dict = {}
    out = []
    for e in prog:
        if isinstance(e, P2P):
            key = (e.label, bool(e.sends))
            tag = seen.get(key, 0)
            seen[key] = tag + 1
            base = 0 if "gradients" not in e.label else 1 << 14
            e = replace(e, tag=base + tag)
        out.append(e)
    return out


# ---------------------------------------------------------------- CosmoFlow
def cosmoflow_parameters(cfg: CNN3D) -> tuple[list[int], list[int]]:
    """(conv gradient sizes, dense gradient sizes) in floats, whole layers."""
    chans = (cfg.in_channels,) + tuple(cfg.conv_channels)
    conv = [chans[i] * chans[i + 1] * cfg.kernel ** 3 + chans[i + 1]
            for i in range(len(cfg.conv_channels))]
    side = cfg.side // 2 ** len(cfg.conv_channels)
    widths = (chans[-1] * side ** 3,) + tuple(cfg.dense)
    dense = [widths[i] * widths[i + 1] + widths[i + 1] for i in range(len(cfg.dense))]
    return conv, dense


def _cosmoflow(name, cfg: CNN3D, lay: Layout, flops_s) -> Proxy:
    if lay.pipeline != 1:
        raise ValueError("cosmoflow has no pipeline layout: use --data and --tensor "
                         "(spatial shards)")
    if lay.tensor not in (1, 2, 4):
        raise ValueError(f"--tensor {lay.tensor}: CosmoFlow splits the volume into 1, 2 "
                         "(one axis) or 4 (2×2) spatial shards")
    _check_positive(micro_batch=cfg.micro_batch)
    t, b, k = lay.tensor, cfg.micro_batch, cfg.kernel
    split = 1 if t == 1 else 2                  # the shard's extent along a split axis: S/2
    partners = {1: (), 2: (1,), 4: (1, 2)}[t]   # xor-neighbours in the tensor group
    chans = (cfg.in_channels,) + tuple(cfg.conv_channels)
    n_conv = len(cfg.conv_channels)
    conv_g, dense_g = cosmoflow_parameters(cfg)
    dense_sharded = -(-sum(dense_g) // t)
    widths = (chans[-1] * (cfg.side // 2 ** n_conv) ** 3,) + tuple(cfg.dense)
    programs = {}
    for rank in range(lay.world):
        me = lay.group_rank("tensor", rank)
        peers = tuple(me ^ x for x in partners)

        def halo(label, channels, side, peers):
            n = b * channels * side * (side // split) * ((k - 1) // 2)
            return P2P(label, n, "tensor", sends=peers, recvs=peers)
        prog = []
        for i in range(n_conv):
            s_in = cfg.side // 2 ** i
            if i >= 1 and peers:
                prog.append(halo(f"conv{i} halo (forward)", chans[i], s_in, peers))
            fl = 2 * b * s_in ** 3 * chans[i] * chans[i + 1] * k ** 3 / t
            prog.append(Compute(f"conv{i} forward", fl / flops_s))
        for j in range(len(cfg.dense)):
            if t > 1:
                prog.append(Collective(f"dense{j} allgather", "allgather",
                                       b * widths[j] // t, "tensor"))
            prog.append(Compute(f"dense{j} forward", 2 * b * widths[j] * widths[j + 1] / t
                                / flops_s))
        for j in reversed(range(len(cfg.dense))):
            prog.append(Compute(f"dense{j} backward", 4 * b * widths[j] * widths[j + 1] / t
                                / flops_s))
            if t > 1:
                prog.append(Collective(f"dense{j} reduce-scatter", "reduce_scatter",
                                       b * widths[j] // t, "tensor"))
        if lay.data > 1:
            prog.append(Collective("dense gradients all-reduce (sharded)", "allreduce",
                                   dense_sharded, "data", blocking=False))
        for i in reversed(range(n_conv)):
            s_in = cfg.side // 2 ** i
            if i >= 1 and peers:
                prog.append(halo(f"conv{i} halo (backward)", chans[i + 1], s_in, peers))
            fl = 4 * b * s_in ** 3 * chans[i] * chans[i + 1] * k ** 3 / t
            prog.append(Compute(f"conv{i} backward", fl / flops_s))
            if lay.world > 1:
                prog.append(Collective(f"conv{i} gradients all-reduce", "allreduce",
                                       conv_g[i], "world", blocking=False))
        if lay.world > 1:
            prog.append(Wait())
        programs[rank] = _tag_p2p(prog)
    notes = ["conv0's input halo comes with the data loading (as in dnn-distributed)",
             "halo: the shard's face (S × S/split), (k-1)/2 = 1 cell deep, per neighbour"]
    return Proxy("cosmoflow", name, lay, summarize(programs, lambda r: "all"), programs, notes,
                {"side": cfg.side, "micro_batch": b, "spatial_shards": t,
                 "parameters": sum(conv_g) + sum(dense_g)})


# ---------------------------------------------------------------- DLRM
def mlp_parameters(widths) -> int:
    return sum(widths[i] * widths[i + 1] + widths[i + 1] for i in range(len(widths) - 1))


def dlrm_top_widths(cfg: Recommender) -> tuple:
    """The top MLP's widths with the dot interaction's output in front: F(F−1)/2 pairwise
    dots of F = tables + 1 vectors, plus the bottom MLP's output."""
    f = len(cfg.tables) + 1
    return (f * (f - 1) // 2 + cfg.bottom[-1],) + tuple(cfg.top)


def _dlrm(name, cfg: Recommender, lay: Layout, flops_s, bytes_s) -> Proxy:
    if lay.tensor != 1 or lay.pipeline != 1:
        raise ValueError("dlrm: embeddings are model-parallel over all ranks and the MLPs "
                         "data-parallel; give only --data N")
    p = lay.world
    if p > len(cfg.tables):
        raise ValueError(f"--data {p}: DLRM needs at most one rank per embedding table "
                         f"({len(cfg.tables)} tables)")
    if cfg.global_batch % p:
        raise ValueError(f"global batch {cfg.global_batch} must be divisible by --data {p}")
    owned = -(-len(cfg.tables) // p)          # the busiest rank's tables (alltoallv padded)
    local = cfg.global_batch // p
    a2a = cfg.global_batch * cfg.dim * owned
    bottom, top = mlp_parameters(cfg.bottom), mlp_parameters(dlrm_top_widths(cfg))
    emb_t = cfg.global_batch * owned * cfg.dim * FLOAT_BYTES / bytes_s
    prog = [Compute("embedding lookup", emb_t)]
    if p > 1:
        prog.append(Collective("embedding all-to-all (forward)", "alltoall", a2a, "world"))
    prog += [Compute("bottom MLP forward", 2 * local * bottom / flops_s),
             Compute("interaction forward", 2 * local * (len(cfg.tables) + 1) ** 2 * cfg.dim
                     / flops_s),
             Compute("top MLP forward", 2 * local * top / flops_s),
             Compute("top MLP backward", 4 * local * top / flops_s)]
    if p > 1:
        prog.append(Collective("top MLP gradients all-reduce", "allreduce", top, "world",
                               blocking=False))
    prog += [Compute("interaction backward", 4 * local * (len(cfg.tables) + 1) ** 2 * cfg.dim
                     / flops_s),
             Compute("bottom MLP backward", 4 * local * bottom / flops_s)]
    if p > 1:
        prog += [Collective("bottom MLP gradients all-reduce", "allreduce", bottom, "world",
                            blocking=False),
                 Collective("embedding all-to-all (backward)", "alltoall", a2a, "world")]
    prog.append(Compute("embedding update", 2 * emb_t))
    if p > 1:
        prog.append(Wait())
    programs = {r: list(prog) for r in range(p)}
    notes = [f"{len(cfg.tables)} tables over {p} rank(s): {owned} on the busiest"]
    return Proxy("dlrm", name, lay, summarize(programs, lambda r: "all"), programs, notes,
                {"global_batch": cfg.global_batch, "dim": cfg.dim, "tables": len(cfg.tables),
                 "bottom_mlp_parameters": bottom, "top_mlp_parameters": top})
