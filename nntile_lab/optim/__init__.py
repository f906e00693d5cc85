"""Optimizers over a model's tiled parameters; their state lives in tiles too.

The defaults (learning rate, betas, eps, momentum, weight decay) are the spec's, the ones
``nntile-lab train`` uses (``spec.DEFAULTS``, ``spec.ADAM_BETAS``, …).

Weight decay applies to matrices and embeddings, not to biases and layer norms
(nanoGPT's grouping: parameters with ≥ 2 dimensions decay). Global gradient-norm
clipping is torch's clip_grad_norm_ (coefficient max_norm/(norm + 1e-6), at most
1), folded into the update kernels as a gradient scale.
"""
from __future__ import annotations

import math

import numpy as np

from nntile_lab import ops
from nntile_lab.spec import ADAM_BETAS, ADAM_EPS, DEFAULTS, SGD_MOMENTUM, default_weight_decay
from nntile_lab.tensor import empty_like


class Optimizer:
    """Base: ``step(lr, clip_norm)`` updates every parameter from ``model.grads``, and
    calls ``model.param_updated(name)`` after each one's update where the model has it
    (GPT2 remakes the parameter's bf16 copy there)."""

    slots: tuple[str, ...] = ()   # per-parameter state tensors

    def __init__(self, model, lr: float, weight_decay: float):
        if not lr >= 0:
            raise ValueError(f"lr={lr!r} must be ≥ 0")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay={weight_decay!r} must be ≥ 0")
        self.model, self.lr, self.weight_decay = model, lr, weight_decay
        self.steps = 0
        self.state = {s: {n: empty_like(p) for n, p in model.params.items()} for s in self.slots}

    def grad_norm(self) -> float:
        """√(Σ over all gradients of g²), the global norm (waits for the gradients)."""
        if any(g.storage.dropped for g in self.model.grads.values()):
            raise RuntimeError("the gradients were dropped after the last update (the "
                               "invalidate hint): compute new ones first")
        # One serial chain of accumulations into one value. In the order the backward
        # finishes the gradients (the head's and last block's first, the embeddings'
        # last) and above every other task, it runs while the backward goes on; in
        # parameter order it would start only with the embeddings' gradient, the last
        # one done, and run after the whole backward on one worker — a tail that grows
        # with depth
        rt, total = self.model.runtime, None
        prio = getattr(self.model, "grad_norm_priority", None) if rt.priorities else None
        with rt.scope(phase="optimizer", priority=prio):
            for g in reversed(list(self.model.grads.values())):
                total = ops.sumsq_all(g, out=total, beta=0.0 if total is None else 1.0)
        return math.sqrt(float(total.to_numpy()[0]))

    def step(self, lr: float | None = None, clip_norm: float | None = None) -> float:
        """One update; returns the gradient norm before clipping."""
        norm = self.grad_norm()
        if not math.isfinite(norm):
            raise FloatingPointError(f"gradient norm is {norm}: not updating the parameters")
        scale = 1.0 if clip_norm is None else min(1.0, clip_norm / (norm + 1e-6))
        self.steps += 1
        lr = self.lr if lr is None else lr
        hints = self.model.runtime.hints
        names = list(self.model.params)
        updated = getattr(self.model, "param_updated", None)
        with self.model.runtime.scope(phase="optimizer"):
            for j, name in enumerate(names):
                p, g = self.model.params[name], self.model.grads[name]
                wd = self.weight_decay if p.ndim >= 2 else 0.0
                self._update(name, p, g, lr, wd, scale)
                if updated is not None:   # e.g. GPT2's bf16 weight copies, tile by tile
                    updated(name)
                if "prefetch" in hints and j + 1 < len(names):   # the next update's tiles,
                    nxt = names[j + 1]                           # once this one is done
                    state = [s[nxt] for s in self.state.values()] if self.steps > 1 else []
                    for t in (self.model.params[nxt], self.model.grads[nxt], *state):
                        t.prefetch(after=p)
                if "invalidate" in hints:   # dead until the next step's zero fill (W mode)
                    g.invalidate()
                if "wont_use" in hints:     # read again at the next step's update
                    for s in self.state.values():
                        s[name].wont_use()
        return norm

    def _update(self, name, p, g, lr, wd, scale):
        raise NotImplementedError

    def state_dict(self) -> dict:
        out = {"steps": self.steps}
        for slot, tensors in self.state.items():
            out |= {f"{slot}.{n}": t.to_numpy() for n, t in tensors.items()}
        return out

    def load_state_dict(self, state: dict) -> None:
        want = {f"{slot}.{n}" for slot, tensors in self.state.items() for n in tensors}
        missing = sorted(want - set(state))
        if missing:
            raise ValueError(f"optimizer state lacks {missing[:3]}… ({len(missing)} entries): "
                             f"it was saved by another optimizer or model config")
        for slot, tensors in self.state.items():
            for n, t in tensors.items():
                array = np.asarray(state[f"{slot}.{n}"], dtype=np.float32)
                if array.shape != t.shape:
                    raise ValueError(f"optimizer state {slot}.{n} has shape {array.shape}, the "
                                     f"model needs {t.shape}: a different model config")
                t.copy_from_numpy(np.ascontiguousarray(array))
        self.steps = int(state["steps"])


class AdamW(Optimizer):
    """torch.optim.AdamW: decoupled weight decay p ← (1 − lr·wd)·p."""

    slots = ("m", "v")
    decoupled = True

    def __init__(self, model, lr: float = DEFAULTS.lr, betas=ADAM_BETAS, eps: float = ADAM_EPS,
                 weight_decay: float = default_weight_decay("adamw")):
        super().__init__(model, lr, weight_decay)
        self.betas, self.eps = tuple(betas), eps

    def _update(self, name, p, g, lr, wd, scale):
        ops.adamw(p, g, self.state["m"][name], self.state["v"][name], step=self.steps,
                  lr=lr, beta1=self.betas[0], beta2=self.betas[1], eps=self.eps,
                  weight_decay=wd, decoupled=self.decoupled, grad_scale=scale)


class Adam(AdamW):
    """torch.optim.Adam: weight decay as an L2 term added to the gradient (by default
    the spec's 0.1, as ``--optimizer adam`` trains; torch's default is 0)."""

    decoupled = False

    def __init__(self, model, lr: float = DEFAULTS.lr, betas=ADAM_BETAS, eps: float = ADAM_EPS,
                 weight_decay: float = default_weight_decay("adam")):
        super().__init__(model, lr, betas, eps, weight_decay)


class SGD(Optimizer):
    """torch.optim.SGD with momentum (and optional Nesterov)."""

    def __init__(self, model, lr: float = DEFAULTS.lr, momentum: float = SGD_MOMENTUM,
                 weight_decay: float = default_weight_decay("sgd"), nesterov: bool = False,
                 dampening: float = 0.0):
        self.slots = ("buf",) if momentum else ()
        super().__init__(model, lr, weight_decay)
        self.momentum, self.nesterov, self.dampening = momentum, nesterov, dampening

    def _update(self, name, p, g, lr, wd, scale):
        buf = self.state["buf"][name] if self.momentum else None
        ops.sgd(p, g, buf, lr=lr, momentum=self.momentum, weight_decay=wd,
                 dampening=self.dampening, nesterov=self.nesterov, first=self.steps == 1,
                 grad_scale=scale)


__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
