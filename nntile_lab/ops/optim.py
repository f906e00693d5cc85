"""Optimizer steps, in place, one task per tile: exactly torch.optim's formulas."""
from __future__ import annotations

import math

from nntile_lab._lib import lib
from nntile_lab.ops._common import check, need_dtype, no_alias, same_layout
from nntile_lab.tensor import TiledTensor


def adamw(p: TiledTensor, g: TiledTensor, m: TiledTensor, v: TiledTensor, *, step: int,
          lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.0, decoupled: bool = True,
          grad_scale: float = 1.0) -> None:
    """One Adam(W) step on parameters p with gradient g and moments m, v (in place).

    decoupled (torch.optim.AdamW):  p ← (1 − lr·wd)·p, then with g' = s·g
    decoupled=False (torch.optim.Adam, L2 decay):  g' = s·g + wd·p
    s = ``grad_scale``: gradient-norm clipping folded into the step (no extra pass)
    m ← β1·m + (1 − β1)·g';  v ← β2·v + (1 − β2)·g'²
    p ← p − lr/(1 − β1^step) · m / (√v / √(1 − β2^step) + eps)
    ``step`` counts from 1; m and v start at zero (fresh tensors read as zeros).
    """
    same_layout(p, g, m, v, names="adamw p, g, m, v")
    no_alias("adamw", {"p": p, "m": m, "v": v}, {"g": g})
    for t, name in ((p, "p"), (g, "g"), (m, "m"), (v, "v")):
        need_dtype(t, "float32", f"adamw: {name}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"adamw: step={step!r} must be an integer ≥ 1 (the first step "
                         "is 1: bias corrections divide by 1 − β^step)")
    for value, name in ((beta1, "beta1"), (beta2, "beta2")):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"adamw: {name}={value} must be in [0, 1)")
    # scalars folded in double: in float32, 1 − 0.999 would be off by 1e-5
    step_size = lr / (1.0 - beta1**step)
    inv_bc2_sqrt = 1.0 / math.sqrt(1.0 - beta2**step)
    decay, l2 = (1.0 - lr * weight_decay, 0.0) if decoupled else (1.0, weight_decay)
    hp, hg, hm, hv, sizes = p.handles, g.handles, m.handles, v.handles, p.traits.tile_sizes
    for i in range(p.ntiles):
        check(lib.nl_submit_adamw(hp[i], hg[i], hm[i], hv[i], sizes[i], beta1, beta2,
                                  1.0 - beta1, 1.0 - beta2, step_size, inv_bc2_sqrt, eps,
                                  decay, l2, grad_scale))


def sgd(p: TiledTensor, g: TiledTensor, buf: TiledTensor | None, *, lr: float,
         momentum: float = 0.0, weight_decay: float = 0.0, dampening: float = 0.0,
         nesterov: bool = False, first: bool = False, grad_scale: float = 1.0) -> None:
    """One SGD step (torch.optim.SGD), in place on p (and buf):

    d = s·g + wd·p (s = ``grad_scale``, clipping folded in); without momentum
    p ← p − lr·d; with momentum
    buf ← d on the first step (``first``), else momentum·buf + (1 − dampening)·d;
    p ← p − lr·(d + momentum·buf if nesterov else buf).
    ``buf`` may be None when momentum is 0.
    """
    need_dtype(p, "float32", "sgd: p")
    need_dtype(g, "float32", "sgd: g")
    same_layout(p, g, names="sgd p, g")
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError(f"sgd: nesterov needs momentum > 0 and dampening = 0 (got "
                         f"momentum={momentum}, dampening={dampening}), as in torch")
    no_alias("sgd", {"p": p, "buf": buf if momentum else None}, {"g": g})
    hp, hg, sizes = p.handles, g.handles, p.traits.tile_sizes
    if momentum == 0:
        for i in range(p.ntiles):
            check(lib.nl_submit_sgd(hp[i], hg[i], sizes[i], lr, weight_decay, grad_scale))
        return
    if buf is None:
        raise ValueError(f"sgd: momentum={momentum} needs a momentum buffer: pass buf= "
                         "(a tensor like p, with first=True on the first step)")
    need_dtype(buf, "float32", "sgd: buf")
    same_layout(p, buf, names="sgd p, buf")
    hb = buf.handles
    for i in range(p.ntiles):
        check(lib.nl_submit_sgd_momentum(hp[i], hg[i], hb[i], sizes[i], lr, weight_decay,
                                         momentum, 1.0 - dampening, int(nesterov),
                                         int(first), grad_scale))
