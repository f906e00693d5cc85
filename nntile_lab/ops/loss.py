"""Cross-entropy loss over a vocabulary split into tiles."""
from __future__ import annotations

import math

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype
from nntile_lab.tensor import TiledTensor, empty


def cross_entropy(logits: TiledTensor, labels: TiledTensor, *, grad: bool = False,
                  grad_scale: float = 1.0) -> tuple[TiledTensor, TiledTensor | None]:
    """loss = mean over tokens s of (logsumexp_v logits[s, v] − logits[s, labels[s]]).

    ``logits`` is float32 with shape S + (V,), ``labels`` int64 with shape S and
    the same tiles on S. Returns ``(loss, dlogits)``: ``loss`` a (1,) tensor, and
    with ``grad`` a new tensor laid out like ``logits``:
    dlogits[s, v] = grad_scale · (softmax(logits[s])[v] − [v == labels[s]]) / ntokens
    (else None). A label outside [0, V) raises TaskError at the next wait.

    Stable in float32: per token a running (max, Σ exp(x − max), picked logit) is
    merged vocabulary tile by vocabulary tile, in order, so results are
    deterministic; then one loss task per token tile and one gradient task per tile.
    """
    need_dtype(logits, "float32", "cross_entropy: logits")
    need_dtype(labels, "int64", "cross_entropy: labels")
    if (logits.shape[:-1] != labels.shape or logits.tile_shape[:-1] != labels.tile_shape):
        raise ValueError(f"cross_entropy: logits {logits!r} must be labels' shape and tiles "
                         f"plus a vocabulary axis; labels are {labels!r}")
    hx, hl = logits.handles, labels.handles
    tx, tl = logits.traits, labels.traits
    vocab, nv = logits.shape[-1], logits.grid_shape[-1]
    ntokens = math.prod(labels.shape)
    stats = empty(labels.shape + (4,), labels.tile_shape + (4,))  # max, Σexp (2), picked
    loss = empty((1,))
    hs = stats.handles
    for si in range(tl.ntiles):
        n = tl.tile_sizes[si]
        for vi in range(nv):
            xi = si * nv + vi
            check(lib.nl_submit_cross_entropy_stats(hx[xi], hl[si], hs[si], n,
                                                    tx.tile_shapes[xi][-1],
                                                    tx.tile_offsets[xi][-1], vocab,
                                                    int(vi == 0)))
        check(lib.nl_submit_cross_entropy_loss(hs[si], loss.handles[0], n, 1.0 / ntokens,
                                               int(si == 0)))
    dlogits = None
    if grad:
        dlogits = empty(logits.shape, logits.tile_shape)
        hd, scale = dlogits.handles, grad_scale / ntokens
        for xi in range(tx.ntiles):
            si = xi // nv
            check(lib.nl_submit_cross_entropy_backward(hx[xi], hl[si], hs[si], hd[xi],
                                                       tl.tile_sizes[si],
                                                       tx.tile_shapes[xi][-1],
                                                       tx.tile_offsets[xi][-1], scale))
    stats.free()  # unregisters once the tasks above are done
    return loss, dlogits
