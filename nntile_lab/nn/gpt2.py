"""GPT-2 on tiled tensors: every op below is a set of StarPU tasks.

Pre-norm blocks, causal multi-head attention, GELU-tanh MLP, learned positions,
the head tied to the token embedding, no dropout. Shapes: B batch, T sequence,
E n_embd, H heads of D = E/H, F n_inner, V vocabulary.

Q, K, V and the attention output are (B, T, E) tensors tiled by whole heads
(head_tile·D along E), so the split E → (H, D) is a free view of the same tiles
and one permute makes the (B, H, T, D) layout the batched products want.
"""
from __future__ import annotations

import math

import numpy as np

from nntile_lab import ops
from nntile_lab.nn import priorities
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.state import from_hf, from_hf_entry, hf_shapes, iter_init_chunks, to_hf
from nntile_lab.runtime import Runtime
from nntile_lab.tensor import TiledTensor, empty, empty_like, from_numpy

HEADS_FIRST = (0, 2, 1, 3)  # (B, T, H, D) ↔ (B, H, T, D)


class GPT2:
    def __init__(self, config: GPT2Config, seed: int = 0):
        self.config = c = config
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
        self.params = {n: empty(shapes[n], tiles[n]) for n in shapes}
        self.grads = {n: empty_like(p) for n, p in self.params.items()}
        for name, row0, chunk in iter_init_chunks(c, seed):   # whole tile bands in numpy
            for n, part in from_hf_entry(name, chunk).items():
                self.params[n].copy_rows_from_numpy(part, row0)

    # ---- public API ------------------------------------------------------------
    def forward_backward(self, input_ids, labels, *, accumulate: bool = False,
                         grad_scale: float = 1.0) -> float:
        """Mean cross-entropy of the batch; its gradient (times ``grad_scale``) is
        added to ``self.grads`` (zeroed first unless ``accumulate``).

        The runtime's memory hints (``Runtime(hints=...)``) change where tiles live, never
        a result: with drop_grads each gradient is zeroed just before its block's
        backward, not here."""
        hints = self.runtime.hints
        if accumulate and any(g.storage.dropped for g in self.grads.values()):
            raise RuntimeError("accumulate=True after the optimizer dropped the gradients "
                               "(the invalidate hint): the first micro-batch of a step must "
                               "not accumulate")
        lazy = "drop_grads" in hints and not accumulate
        if not accumulate and not lazy:
            with self._stage(None, "backward", priorities.ZERO_GRAD):
                for g in self.grads.values():
                    ops.fill(g, 0.0)
        ids, labels_t, pos = self._inputs(input_ids, labels)
        saved, x = self._forward(ids, pos, keep=True)
        loss, dlogits = self._head(x, labels_t, saved, grad_scale)
        self._backward(ids, pos, saved, dlogits, zero_grads=lazy)
        return float(loss.to_numpy()[0])

    def loss(self, input_ids, labels) -> float:
        """Mean cross-entropy, forward only (validation)."""
        ids, labels_t, pos = self._inputs(input_ids, labels)
        _, x = self._forward(ids, pos, keep=False)
        loss, _ = self._head(x, labels_t, None, 1.0)
        return float(loss.to_numpy()[0])

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters with Hugging Face GPT2LMHeadModel names and layouts."""
        return to_hf({n: p.to_numpy() for n, p in self.params.items()}, self.config)

    def grad_state_dict(self) -> dict[str, np.ndarray]:
        """Gradients, same names and layouts as ``state_dict()``."""
        return to_hf({n: g.to_numpy() for n, g in self.grads.items()}, self.config)

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for n, array in from_hf(state, self.config).items():
            self.params[n].copy_from_numpy(array)

    def flops_per_token(self, seq_len: int) -> float:
        return self.config.flops_per_token(seq_len)

    def free(self) -> None:
        for t in (*self.params.values(), *self.grads.values()):
            t.free()

    def _stage(self, layer: int | None, phase: str, priority: int | None = None):
        """Scope of one stage of the step: its layer and phase tags and, with the runtime's
        ``priorities`` on, its priority (``priority`` or the stage's, nn.priorities)."""
        if not self.runtime.priorities:
            priority = None
        elif priority is None:
            rank = priorities.forward if phase == "forward" else priorities.backward
            priority = rank(layer, self.config.n_layer)
        return self.runtime.scope(layer=layer, phase=phase, priority=priority)

    # ---- forward -----------------------------------------------------------------
    def _inputs(self, input_ids, labels):
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
        return from_numpy(ids, tiles), from_numpy(labels, tiles), from_numpy(pos, tiles)

    def _forward(self, ids, pos, keep: bool):
        p, eps = self.params, self.config.layer_norm_epsilon
        with self._stage(0, "forward"):
            x = ops.embedding(ids, p["transformer.wte.weight"])
            wpe = ops.embedding(pos, p["transformer.wpe.weight"])
            ops.add(wpe, x)
            wpe.free()
        saved, hints, L = [], self.runtime.hints, self.config.n_layer
        for i in range(L):
            if "prefetch" in hints and i + 1 < L:   # the next block's weights, as this starts
                for t in self._layer_params(i + 1).values():
                    t.prefetch(after=x)
            with self._stage(i, "forward"):
                acts, out = self._block_forward(i, x)
            if keep:
                saved.append(acts)
                if "wont_use" in hints and i + 1 < L:   # read again only in the backward
                    for t in acts.values():
                        t.wont_use(after=out)
            else:
                _free(acts)
            x = out
        with self._stage(self.config.n_layer, "forward"):
            xf, mean, inv_std = ops.layer_norm(x, p["transformer.ln_f.weight"],
                                               p["transformer.ln_f.bias"], axis=2, eps=eps)
        saved.append({"x": x, "xf": xf, "mean": mean, "inv_std": inv_std})
        return saved, xf

    def _block_forward(self, i: int, x: TiledTensor):
        p, c = self._layer_params(i), self.config
        D, eps = c.head_size, c.layer_norm_epsilon
        a = {"x": x}
        a["ln1"], a["m1"], a["r1"] = ops.layer_norm(x, p["ln_1.weight"], p["ln_1.bias"],
                                                     axis=2, eps=eps)
        for q in "qkv":
            y = _linear(a["ln1"], p[f"attn.{q}.weight"], p[f"attn.{q}.bias"])
            a[q] = ops.permute(y.split_axis(2, D), HEADS_FIRST)          # (B, H, T, D)
            y.free()
        scores = ops.gemm(a["q"], a["k"], trans_b=True, batch_ndim=2, alpha=1 / math.sqrt(D))
        ops.mask_causal(scores)
        a["att"] = ops.softmax(scores, axis=3)                           # (B, H, T, T)
        scores.free()
        heads = ops.gemm(a["att"], a["v"], batch_ndim=2)                 # (B, H, T, D)
        a["o"] = ops.permute(heads, HEADS_FIRST).merge_axes(2)           # (B, T, E)
        heads.free()
        a["h"] = h = _linear(a["o"], p["attn.c_proj.weight"], p["attn.c_proj.bias"])
        ops.add(x, h)                                                    # h = x + attn
        a["ln2"], a["m2"], a["r2"] = ops.layer_norm(h, p["ln_2.weight"], p["ln_2.bias"],
                                                     axis=2, eps=eps)
        a["f"] = _linear(a["ln2"], p["mlp.c_fc.weight"], p["mlp.c_fc.bias"])
        a["g"] = ops.gelu(a["f"])
        out = _linear(a["g"], p["mlp.c_proj.weight"], p["mlp.c_proj.bias"])
        ops.add(h, out)                                                  # out = h + mlp
        return a, out

    def _head(self, xf, labels, saved, grad_scale):
        """Tied head and loss; with ``saved``, also the logits' gradient."""
        with self._stage(self.config.n_layer, "forward"):
            logits = ops.gemm(xf, self.params["transformer.wte.weight"], trans_b=True)
            loss, dlogits = ops.cross_entropy(logits, labels, grad=saved is not None,
                                              grad_scale=grad_scale)
            logits.free()
        if saved is None:
            xf.free()
        return loss, dlogits

    # ---- backward ----------------------------------------------------------------
    def _backward(self, ids, pos, saved, dlogits, zero_grads: bool = False):
        """``zero_grads``: zero each gradient just before the first task that adds to it
        (a fill ordered after the gradient flowing into its block), not all at once."""
        p, g, hints = self.params, self.grads, self.runtime.hints
        top = saved.pop()
        if zero_grads:
            with self._stage(self.config.n_layer, "backward", priorities.ZERO_GRAD):
                for n in ("transformer.wte.weight", "transformer.ln_f.weight",
                          "transformer.ln_f.bias"):
                    ops.fill(g[n], 0.0, after=dlogits)
        with self._stage(self.config.n_layer, "backward"):
            dxf = ops.gemm(dlogits, p["transformer.wte.weight"])
            with _weight_grads():
                ops.gemm(dlogits, top["xf"], trans_a=True, ndim=2, beta=1.0,
                         out=g["transformer.wte.weight"])
            dlogits.free()
            dx, _, _ = ops.layer_norm_backward(
                top["x"], dxf, p["transformer.ln_f.weight"], top["mean"], top["inv_std"],
                axis=2, dgamma=g["transformer.ln_f.weight"], dbeta=g["transformer.ln_f.bias"])
            _free(top)
            dxf.free()
        for i in reversed(range(self.config.n_layer)):
            acts = saved.pop()
            if "prefetch" in hints and i > 0:   # the block below, as this block starts
                # (parameters only: StarPU 1.3 aborts when a tile with a prefetch and a
                # wont_use push to disk in flight is unregistered, as activations are)
                for t in self._layer_params(i - 1).values():
                    t.prefetch(after=dx)
            if zero_grads:
                with self._stage(i, "backward", priorities.ZERO_GRAD):
                    for t in self._layer_params(i, self.grads).values():
                        ops.fill(t, 0.0, after=dx)
            with self._stage(i, "backward"):
                dx = self._block_backward(i, acts, dx)
            if "wont_use" in hints:   # this block's weights and gradients: next needed by
                for t in (*self._layer_params(i).values(),           # the optimizer
                          *self._layer_params(i, self.grads).values()):
                    t.wont_use(after=dx)
        if zero_grads:
            with self._stage(0, "backward", priorities.ZERO_GRAD):
                ops.fill(g["transformer.wpe.weight"], 0.0, after=dx)
        with self._stage(0, "backward"), _weight_grads():
            ops.embedding_backward(ids, dx, g["transformer.wte.weight"])
            ops.embedding_backward(pos, dx, g["transformer.wpe.weight"])
        _free({"dx": dx, "ids": ids, "pos": pos})

    def _block_backward(self, i: int, a: dict, dout: TiledTensor) -> TiledTensor:
        p, g = self._layer_params(i), self._layer_params(i, self.grads)
        D = self.config.head_size
        # MLP: out = h + c_proj(gelu(c_fc(ln2(h))))
        dg = _linear_backward(a["g"], dout, p["mlp.c_proj.weight"], g["mlp.c_proj.weight"],
                              g["mlp.c_proj.bias"])
        df = ops.gelu_backward(a["f"], dg)
        dg.free()
        dln2 = _linear_backward(a["ln2"], df, p["mlp.c_fc.weight"], g["mlp.c_fc.weight"],
                                g["mlp.c_fc.bias"])
        df.free()
        dh = dout   # the residual's gradient, plus (in place) what flows through ln_2
        ops.layer_norm_backward(a["h"], dln2, p["ln_2.weight"], a["m2"], a["r2"], axis=2,
                                dx=dh, dgamma=g["ln_2.weight"], dbeta=g["ln_2.bias"])
        dln2.free()
        # attention: h = x + c_proj(softmax(mask(q·kᵀ/√D))·v)
        do = _linear_backward(a["o"], dh, p["attn.c_proj.weight"], g["attn.c_proj.weight"],
                              g["attn.c_proj.bias"])
        dheads = ops.permute(do.split_axis(2, D), HEADS_FIRST)
        do.free()
        datt = ops.gemm(dheads, a["v"], trans_b=True, batch_ndim=2)
        dqkv = {"v": ops.gemm(a["att"], dheads, trans_a=True, batch_ndim=2)}
        dheads.free()
        dscores = ops.softmax_backward(a["att"], datt, axis=3)
        datt.free()
        scale = 1 / math.sqrt(D)
        dqkv["q"] = ops.gemm(dscores, a["k"], batch_ndim=2, alpha=scale)
        dqkv["k"] = ops.gemm(dscores, a["q"], trans_a=True, batch_ndim=2, alpha=scale)
        dscores.free()
        dln1 = None
        for q in "qkv":
            dy = ops.permute(dqkv.pop(q), HEADS_FIRST).merge_axes(2)
            dln1 = _linear_backward(a["ln1"], dy, p[f"attn.{q}.weight"], g[f"attn.{q}.weight"],
                                    g[f"attn.{q}.bias"], dx=dln1)
            dy.free()
        dx = dh    # likewise through ln_1
        ops.layer_norm_backward(a["x"], dln1, p["ln_1.weight"], a["m1"], a["r1"], axis=2,
                                dx=dx, dgamma=g["ln_1.weight"], dbeta=g["ln_1.bias"])
        dln1.free()
        _free(a)
        return dx

    def _layer_params(self, i: int, source: dict | None = None) -> dict:
        prefix = f"transformer.h.{i}."
        source = self.params if source is None else source
        return {n[len(prefix):]: t for n, t in source.items() if n.startswith(prefix)}


def _linear(x: TiledTensor, w: TiledTensor, b: TiledTensor) -> TiledTensor:
    """y[..., j] = Σ_i x[..., i]·w[i, j] + b[j]"""
    y = ops.gemm(x, w)
    ops.add_fiber(b, y, axis=y.ndim - 1)
    return y


def _linear_backward(x, dy, w, dw, db, dx=None) -> TiledTensor:
    """dw += xᵀ·dy; db += Σ dy; returns dx (+)= dy·wᵀ."""
    lead = x.ndim - 1
    with _weight_grads():
        ops.gemm(x, dy, trans_a=True, ndim=lead, beta=1.0, out=dw)
        ops.sum_fiber(dy, axis=dy.ndim - 1, out=db, beta=1.0)
    return ops.gemm(dy, w, trans_b=True, out=dx, beta=0.0 if dx is None else 1.0)


def _weight_grads():
    """Scope of weight-gradient accumulations: off the critical path (they feed only the
    optimizer), so with priorities on they fill the gaps of the dx chain."""
    rt = Runtime.current()
    return rt.scope(priority=priorities.WEIGHT_GRAD if rt.priorities else None)


def _free(tensors: dict) -> None:
    # no invalidate hint needed first: a tile with no home node is dropped, never written
    # back, by its free (measured: the same disk bytes either way)
    for t in tensors.values():
        t.free()


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
