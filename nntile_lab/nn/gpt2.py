"""GPT-2 on tiled tensors: every op below is a set of StarPU tasks.

Pre-norm blocks, causal multi-head attention, GELU-tanh MLP, learned positions,
the head tied to the token embedding, no dropout. Shapes: B batch, T sequence,
E n_embd, H heads of D = E/H, F n_inner, V vocabulary.

Q, K, V and the attention output are (B, T, E) tensors tiled by whole heads
(head_tile·D along E), so the split E → (H, D) is a free view of the same tiles
and one permute makes the (B, H, T, D) layout the batched products want.

This file is the math: each layer's forward and backward side by side, the formula in
one comment. Where tensors are freed, which stage and priority a task gets and which
memory hints fire is ``nn.policy``'s (every stage runs inside a ``StepPolicy`` stage,
whose ``temp`` frees a temporary when the stage ends); what the forward keeps for the
backward is the typed records of ``nn.activations``, which the memory planner sizes.
Which tensors are bf16 under a precision mode (GEMM operands, saved activations) is
``nn.precision``'s ``Casts``: here every GEMM operand passes through ``c.operand`` and
every saved activation through ``c.keep``, which are identities under ``fp32``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from nntile_lab import ops
from nntile_lab.nn import priorities
from nntile_lab.nn.activations import Activations, Batch, BlockActivations, HeadActivations
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.policy import Stage, StepPolicy
from nntile_lab.nn.precision import Casts
from nntile_lab.nn.state import from_hf, from_hf_entry, hf_shapes, iter_init_chunks, to_hf
from nntile_lab.runtime import Runtime
from nntile_lab.tensor import BFLOAT16, TiledTensor, empty, empty_like, from_numpy

HEADS_FIRST = (0, 2, 1, 3)  # (B, T, H, D) ↔ (B, H, T, D)


# ---- the parameters (or their gradients), by layer ------------------------------------
class _Group:
    def tensors(self) -> list[TiledTensor]:
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            out += v.tensors() if isinstance(v, _Group) else [v]
        return out


@dataclass
class Linear(_Group):
    weight: TiledTensor     # (in, out)
    bias: TiledTensor       # (out,)


@dataclass
class LayerNorm(_Group):
    weight: TiledTensor     # (E,)
    bias: TiledTensor       # (E,)


@dataclass
class Block(_Group):
    ln_1: LayerNorm
    q: Linear               # c_attn, split by q, k, v
    k: Linear
    v: Linear
    attn_proj: Linear       # attn.c_proj
    ln_2: LayerNorm
    fc: Linear              # mlp.c_fc
    mlp_proj: Linear        # mlp.c_proj


@dataclass
class Weights:
    """A model's parameters (or gradients) by layer; the tensors are those of the
    Hugging Face-named dict they are read from."""

    wte: TiledTensor        # (V, E), also the head
    wpe: TiledTensor        # (n_positions, E)
    blocks: list[Block]
    ln_f: LayerNorm

    @classmethod
    def of(cls, named: dict[str, TiledTensor], n_layer: int) -> Weights:
        def lin(name):
            return Linear(named[name + ".weight"], named[name + ".bias"])

        def norm(name):
            return LayerNorm(named[name + ".weight"], named[name + ".bias"])

        blocks = []
        for i in range(n_layer):
            h = f"transformer.h.{i}."
            blocks.append(Block(norm(h + "ln_1"), lin(h + "attn.q"), lin(h + "attn.k"),
                                lin(h + "attn.v"), lin(h + "attn.c_proj"), norm(h + "ln_2"),
                                lin(h + "mlp.c_fc"), lin(h + "mlp.c_proj")))
        return cls(named["transformer.wte.weight"], named["transformer.wpe.weight"], blocks,
                   norm("transformer.ln_f"))

    def tensors(self) -> list[TiledTensor]:
        """Every tensor, in Hugging Face order."""
        return [self.wte, self.wpe, *(t for b in self.blocks for t in b.tensors()),
                *self.ln_f.tensors()]


class GPT2:
    """``precision`` (``nn.precision``): ``fp32``, ``bf16`` or ``bf16-storage``. Under
    ``bf16`` each GEMM weight has a bf16 copy (``params16``), made from the float32
    master weight at construction, by ``load_state_dict`` and, after each optimizer
    update, by ``param_updated`` (the optimizers call it): whoever writes ``params``
    otherwise calls ``refresh_weight_copies``."""

    def __init__(self, config: GPT2Config, seed: int = 0, precision: str = "fp32"):
        self.config = c = config
        self.casts = Casts(precision)
        self.precision = precision
        self.runtime = Runtime.current()
        E, F, V, P = c.n_embd, c.n_inner, c.vocab_size, c.n_positions
        et, it = c.tile("embd_tile", E), c.tile("inner_tile", F)
        ht = c.tile("head_tile", c.n_head) * c.head_size   # E tiled by whole heads
        vt, st = c.tile("vocab_tile", V), c.tile("seq_tile", P)
        tiles = {"transformer.wte.weight": (vt, et), "transformer.wpe.weight": (st, et),
                 "transformer.ln_f.weight": (et,), "transformer.ln_f.bias": (et,)}
        for i in range(c.n_layer):
            h = f"transformer.h.{i}."
            tiles |= {h + "ln_1.weight": (et,), h + "ln_1.bias": (et,),
                      h + "ln_2.weight": (et,), h + "ln_2.bias": (et,),
                      h + "attn.c_proj.weight": (ht, et), h + "attn.c_proj.bias": (et,),
                      h + "mlp.c_fc.weight": (et, it), h + "mlp.c_fc.bias": (it,),
                      h + "mlp.c_proj.weight": (it, et), h + "mlp.c_proj.bias": (et,)}
            for q in "qkv":
                tiles |= {h + f"attn.{q}.weight": (et, ht), h + f"attn.{q}.bias": (ht,)}
        shapes = hf_shapes(c, split_qkv=True)
        self.params = {n: empty(shapes[n], tiles[n]) for n in shapes}   # HF names
        self.grads = {n: empty_like(p) for n, p in self.params.items()}
        self.w = Weights.of(self.params, c.n_layer)   # the same tensors, by layer
        self.g = Weights.of(self.grads, c.n_layer)
        for name, row0, chunk in iter_init_chunks(c, seed):   # whole tile bands in numpy
            for n, part in from_hf_entry(name, chunk).items():
                self.params[n].copy_rows_from_numpy(part, row0)
        # bf16 copies of the weights the GEMMs read (not wpe: an embedding lookup only)
        self.params16 = ({n: empty_like(p, BFLOAT16) for n, p in self.params.items()
                          if p.ndim == 2 and n != "transformer.wpe.weight"}
                         if self.casts.gemm_bf16 else {})
        # the weights the step reads, by layer: the bf16 copies for the GEMMs, the float32
        # tensors elsewhere (the step policy's prefetch and wont_use hints follow these)
        self.wg = Weights.of(self.params | self.params16, c.n_layer)
        self.refresh_weight_copies()

    # ---- public API ------------------------------------------------------------
    def forward_backward(self, input_ids, labels, *, accumulate: bool = False,
                         grad_scale: float = 1.0) -> float:
        """Mean cross-entropy of the batch; its gradient (times ``grad_scale``) is
        added to ``self.grads`` (zeroed first unless ``accumulate``).

        The runtime's memory hints (``Runtime(hints=...)``) change where tiles live, never
        a result (``nn.policy``)."""
        step = StepPolicy(self.runtime, self.wg, self.g, backward=True)
        step.start_gradients(accumulate)
        acts = self.forward(input_ids, labels, step)
        loss, dlogits = self._head(acts, step, grad_scale)
        self._backward(acts, dlogits, step)
        return float(loss.to_numpy()[0])

    def loss(self, input_ids, labels) -> float:
        """Mean cross-entropy, forward only (validation)."""
        step = StepPolicy(self.runtime, self.wg, self.g, backward=False)
        loss, _ = self._head(self.forward(input_ids, labels, step), step, 1.0)
        return float(loss.to_numpy()[0])

    def forward(self, input_ids, labels, step: StepPolicy | None = None) -> Activations:
        """The forward up to the final layer norm; returns what a training step keeps for
        its backward (free it with ``.free()``). Under a ``step`` without backward, the
        blocks' records are freed as the forward goes (``loss``)."""
        step = step or StepPolicy(self.runtime, self.wg, self.g, backward=True)
        w, c = self.w, self.config
        batch = self._batch(input_ids, labels)
        with step.embedding_forward() as s:
            x = ops.embedding(batch.ids, w.wte)                          # (B, T, E)
            ops.add(s.temp(ops.embedding(batch.pos, w.wpe)), x)          # x = wte[ids] + wpe[pos]
        blocks = []
        for i, p in enumerate(self.wg.blocks):
            with step.block_forward(i, x) as s:
                a, x = self._block_forward(p, x, s)
                s.save(a, after=x)
            blocks.append(a)
        with step.head_forward() as s:
            xf, mean, inv_std = ops.layer_norm(x, w.ln_f.weight, w.ln_f.bias, axis=2,
                                               eps=c.layer_norm_epsilon)
            xf = self.casts.keep(xf, s)
        return Activations(batch, blocks, HeadActivations(x, xf, mean, inv_std))

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters with Hugging Face GPT2LMHeadModel names and layouts."""
        return to_hf({n: p.to_numpy() for n, p in self.params.items()}, self.config)

    def grad_state_dict(self) -> dict[str, np.ndarray]:
        """Gradients, same names and layouts as ``state_dict()``."""
        return to_hf({n: g.to_numpy() for n, g in self.grads.items()}, self.config)

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for n, array in from_hf(state, self.config).items():
            self.params[n].copy_from_numpy(array)
        self.refresh_weight_copies()

    def param_updated(self, name: str) -> None:
        """The optimizer has updated ``params[name]``: remake its bf16 copy (one task per
        tile, each after that tile's update)."""
        if name in self.params16:
            ops.to_bf16(self.params[name], out=self.params16[name])

    def refresh_weight_copies(self) -> None:
        """Remake every bf16 weight copy from the float32 parameters (none under fp32)."""
        for name in self.params16:
            self.param_updated(name)

    @property
    def grad_norm_priority(self) -> int:
        """The task priority an optimizer gives the gradient-norm chain
        (``nn.priorities``)."""
        return priorities.grad_norm(self.config.n_layer)

    def flops_per_token(self, seq_len: int) -> float:
        return self.config.flops_per_token(seq_len)

    def free(self) -> None:
        for t in (*self.params.values(), *self.grads.values(), *self.params16.values()):
            t.free()

    # ---- generation (nn.decoding): the trunk over a KV cache ---------------------------
    def attention_shapes(self):
        c = self.config
        return [(c.n_head, c.head_size, c.tile("head_tile", c.n_head))] * c.n_layer

    @property
    def head_weight(self) -> TiledTensor:
        return self.w.wte

    def cached_hidden(self, ids: TiledTensor, pos: TiledTensor, cache) -> TiledTensor:
        from nntile_lab.nn.decoding import attend_cached
        w, eps = self.w, self.config.layer_norm_epsilon
        x = ops.embedding(ids, w.wte)
        with ops.embedding(pos, w.wpe) as p:
            ops.add(p, x)
        for b in w.blocks:
            ln1, m, r = ops.layer_norm(x, b.ln_1.weight, b.ln_1.bias, axis=2, eps=eps)
            m.free(), r.free()
            q, k, v = (_linear(ln1, lin) for lin in (b.q, b.k, b.v))
            ln1.free()
            y = attend_cached(q, k, v, cache)
            for t in (q, k, v):
                t.free()
            h = _linear(y, b.attn_proj)
            y.free()
            ops.add(x, h)
            x.free()
            ln2, m, r = ops.layer_norm(h, b.ln_2.weight, b.ln_2.bias, axis=2, eps=eps)
            m.free(), r.free()
            fc = _linear(ln2, b.fc)
            ln2.free()
            g = ops.gelu(fc)
            fc.free()
            x = _linear(g, b.mlp_proj)
            g.free()
            ops.add(h, x)
            h.free()
        xf, m, r = ops.layer_norm(x, w.ln_f.weight, w.ln_f.bias, axis=2, eps=eps)
        m.free(), r.free(), x.free()
        return xf

    def generate(self, prompt_ids, max_new_tokens: int, **kw):
        from nntile_lab.nn.generation import generate
        return generate(self, prompt_ids, max_new_tokens, **kw)

    # ---- a block: h = x + c_proj(attention(ln_1(x))), out = h + c_proj(gelu(c_fc(ln_2(h))))
    def _block_forward(self, p: Block, x: TiledTensor, s: Stage):
        """``p``: the block's parameters (bf16 copies for its GEMM weights under bf16)."""
        D, eps, c = self.config.head_size, self.config.layer_norm_epsilon, self.casts
        ln1, ln1_mean, ln1_inv_std = ops.layer_norm(x, p.ln_1.weight, p.ln_1.bias, axis=2,
                                                    eps=eps)
        ln1k = c.keep(ln1, s)
        ln1g = c.operand(ln1k, s, fp32=ln1)
        qkv = [_heads(s.temp(_linear(ln1g, lin)), D) for lin in (p.q, p.k, p.v)]
        qk, kk, vk = (c.keep(t, s) for t in qkv)
        q, k, v = (c.operand(tk, s, fp32=t) for tk, t in zip((qk, kk, vk), qkv))
        att = _attention(q, k, s)                                        # (B, H, T, T)
        y = ops.permute(s.temp(ops.gemm(c.operand(att, s), v, batch_ndim=2)),
                        HEADS_FIRST).merge_axes(2)                      # (B, T, E)
        yk = c.keep(y, s)
        h = _linear(c.operand(yk, s, fp32=y), p.attn_proj)
        ops.add(x, h)                                                    # h = x + c_proj(y)
        ln2, ln2_mean, ln2_inv_std = ops.layer_norm(h, p.ln_2.weight, p.ln_2.bias, axis=2,
                                                    eps=eps)
        ln2k = c.keep(ln2, s)
        fc = _linear(c.operand(ln2k, s, fp32=ln2), p.fc)                # (B, T, F)
        fck, gk, gelu = c.gelu(fc, s)
        out = _linear(gelu, p.mlp_proj)
        ops.add(h, out)                                                  # out = h + mlp
        return BlockActivations(x, ln1k, ln1_mean, ln1_inv_std, qk, kk, vk, att, yk, h,
                                ln2k, ln2_mean, ln2_inv_std, fck, gk), out

    def _block_backward(self, p: Block, g: Block, a: BlockActivations, dx: TiledTensor,
                        s: Stage) -> None:
        """``dx``: ∂loss/∂out in, ∂loss/∂x out (in place: the residual passes it through,
        each branch adds to it); ``g`` gets the block's weight gradients; ``p`` as in
        ``_block_forward``."""
        D, c = self.config.head_size, self.casts
        # MLP: out = h + c_proj(gelu(c_fc(ln_2(h))))
        dgelu = s.temp(_linear_backward(c, a.gelu, dx, p.mlp_proj, g.mlp_proj, s))
        dfc = s.temp(c.gelu_backward(a.fc, dgelu))
        dln2 = s.temp(_linear_backward(c, a.ln2, dfc, p.fc, g.fc, s))
        ops.layer_norm_backward(a.h, dln2, p.ln_2.weight, a.ln2_mean, a.ln2_inv_std, axis=2,
                                dx=dx, dgamma=g.ln_2.weight, dbeta=g.ln_2.bias)  # dh += ∂ln_2
        # attention: h = x + c_proj(softmax(mask(q·kᵀ/√D))·v)
        dy = s.temp(_linear_backward(c, a.y, dx, p.attn_proj, g.attn_proj, s))
        dheads = c.operand(s.temp(_heads(dy, D)), s)                    # (B, H, T, D)
        datt = s.temp(ops.gemm(dheads, c.operand(a.v, s), trans_b=True,
                               batch_ndim=2))                            # datt = dheads·vᵀ
        dv = ops.gemm(c.operand(a.att, s), dheads, trans_a=True,
                      batch_ndim=2)                                      # dv = attᵀ·dheads
        dq, dk = _attention_backward(c, a.q, a.k, a.att, datt, s)
        dln1, ln1 = None, c.operand(a.ln1, s)                            # widened once
        for d, lin, glin in ((dq, p.q, g.q), (dk, p.k, g.k), (dv, p.v, g.v)):
            dlin = s.temp(ops.permute(s.temp(d), HEADS_FIRST).merge_axes(2))   # (B, T, E)
            dln1 = _linear_backward(c, ln1, dlin, lin, glin, s, dx=dln1)
        ops.layer_norm_backward(a.x, s.temp(dln1), p.ln_1.weight, a.ln1_mean, a.ln1_inv_std,
                                axis=2, dx=dx, dgamma=g.ln_1.weight,
                                dbeta=g.ln_1.bias)                       # dx += ∂ln_1

    # ---- the tied head: loss = cross_entropy(ln_f(x)·wteᵀ, labels) --------------------
    def _head(self, acts: Activations, step: StepPolicy, grad_scale: float):
        """The loss and, in a step with a backward, ∂loss/∂logits (times ``grad_scale``)."""
        with step.head_forward() as s:
            xf = self.casts.operand(acts.head.xf, s)
            logits = s.temp(ops.gemm(xf, self.wg.wte, trans_b=True,      # (B, T, V)
                                     out_dtype=self.casts.logits_dtype(xf)))
            loss, dlogits = ops.cross_entropy(logits, acts.batch.labels, grad=step.backward,
                                              grad_scale=grad_scale)
            s.save(acts.head, after=loss)
            s.save(acts.batch, after=loss)
        return loss, dlogits

    def _backward(self, acts: Activations, dlogits: TiledTensor, step: StepPolicy) -> None:
        w, g, top, c = self.w, self.g, acts.head, self.casts
        with step.head_backward(dlogits, top) as s:
            dlogits = c.head_gradient(dlogits, s)
            dxf = s.temp(ops.gemm(dlogits, self.wg.wte))                 # dxf = dlogits·wte
            with s.weight_grads():                                       # dwte += dlogitsᵀ·xf
                ops.gemm(dlogits, c.operand(top.xf, s), trans_a=True, ndim=2, beta=1.0,
                         out=g.wte)
            dx, _, _ = ops.layer_norm_backward(top.x, dxf, w.ln_f.weight, top.mean,
                                               top.inv_std, axis=2, dgamma=g.ln_f.weight,
                                               dbeta=g.ln_f.bias)        # dx = ∂ln_f
        for i in reversed(range(self.config.n_layer)):
            with step.block_backward(i, dx, acts.blocks[i]) as s:
                self._block_backward(self.wg.blocks[i], g.blocks[i], acts.blocks[i], dx, s)
        with step.embedding_backward(dx, acts.batch):                    # weight grads only
            ops.embedding_backward(acts.batch.ids, dx, g.wte)            # dwte[ids] += dx
            ops.embedding_backward(acts.batch.pos, dx, g.wpe)            # dwpe[pos] += dx

    # ---- inputs ----------------------------------------------------------------------
    def _batch(self, input_ids, labels) -> Batch:
        c = self.config
        ids, labels = _token_array(input_ids, "input_ids", c), _token_array(labels, "labels", c)
        if ids.shape != labels.shape:
            raise ValueError(f"labels shape {labels.shape} differs from input_ids shape "
                             f"{ids.shape}")
        B, T = ids.shape
        if c.n_positions < T:
            raise ValueError(f"sequence length {T} exceeds n_positions={c.n_positions}: use "
                             f"sequences of at most {c.n_positions} tokens")
        tiles = (c.tile("batch_tile", B), c.tile("seq_tile", T))
        pos = np.ascontiguousarray(np.broadcast_to(np.arange(T, dtype=np.int64), (B, T)))
        return Batch(from_numpy(ids, tiles), from_numpy(labels, tiles), from_numpy(pos, tiles))


# ---- layers: forward and backward side by side ------------------------------------------
def _linear(x: TiledTensor, p: Linear) -> TiledTensor:
    """y[..., j] = Σ_i x[..., i]·w[i, j] + b[j]"""
    y = ops.gemm(x, p.weight)
    ops.add_fiber(p.bias, y, axis=y.ndim - 1)
    return y


def _linear_backward(c: Casts, x, dy, p: Linear, g: Linear, s: Stage, dx=None) -> TiledTensor:
    """dw += xᵀ·dy; db += Σ dy; returns dx (+)= dy·wᵀ (``x`` as saved, ``dy`` float32,
    both passed to the GEMMs as ``c`` says; the sums and ``dx`` float32)."""
    dyg = c.operand(dy, s)
    with s.weight_grads():
        ops.gemm(c.operand(x, s), dyg, trans_a=True, ndim=x.ndim - 1, beta=1.0, out=g.weight)
        ops.sum_fiber(dy, axis=dy.ndim - 1, out=g.bias, beta=1.0)
    return ops.gemm(dyg, p.weight, trans_b=True, out=dx, beta=0.0 if dx is None else 1.0)


def _heads(y: TiledTensor, D: int) -> TiledTensor:
    """(B, T, E) → (B, H, T, D): a free split of E by heads, then one permute."""
    return ops.permute(y.split_axis(2, D), HEADS_FIRST)


def _attention(q, k, s: Stage) -> TiledTensor:
    """att = softmax(mask(q·kᵀ/√D)), causal, over the last axis."""
    scores = s.temp(ops.gemm(q, k, trans_b=True, batch_ndim=2, alpha=1 / math.sqrt(q.shape[3])))
    ops.mask_causal(scores)
    return ops.softmax(scores, axis=3)


def _attention_backward(c: Casts, q, k, att, datt, s: Stage):
    """dscores = softmax'(att)·datt; dq = dscores·k/√D; dk = dscoresᵀ·q/√D (softmax's
    backward in float32, ``att`` float32 in every mode; the GEMMs' operands as ``c``
    says)."""
    dscores = c.operand(s.temp(ops.softmax_backward(att, datt, axis=3)), s)
    scale = 1 / math.sqrt(q.shape[3])
    q, k = c.operand(q, s), c.operand(k, s)
    return (ops.gemm(dscores, k, batch_ndim=2, alpha=scale),
            ops.gemm(dscores, q, trans_a=True, batch_ndim=2, alpha=scale))


def _token_array(a, what: str, c: GPT2Config) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what} must be a 2-D integer array (batch, sequence), got shape "
                         f"{a.shape} and dtype {a.dtype}")
    bad = (a < 0) | (a >= c.vocab_size)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what}[{idx}] = {int(a[idx])} is not a token id of this model: ids "
                         f"must be in [0, {c.vocab_size}) (vocab_size={c.vocab_size})")
    return np.ascontiguousarray(a, dtype=np.int64)
