"""Gradient check for a layer or a composition: its backward against PyTorch autograd (in
float64) or, without PyTorch, against central finite differences of its own forward, summed
in float64.

    report = nn.gradcheck(nn.Linear(8, 5, in_tile=3), [x], tiles=[(2, 4, 3)],
                          reference=lambda x, p: x @ p["weight"] + p["bias"])

The layer runs as in a training step (tape, policy, its own forward and backward) on the
given inputs (numpy; float inputs are differentiated, int64 ones — token ids — are not),
its parameters drawn from their declared inits. Its output y is projected on a random w
(the loss ⟨w, y⟩; a loss layer's own loss as it is), the backward runs from dL/dy = w, and
every parameter's and float input's gradient is compared:

- ``reference(*inputs, params)``: a PyTorch function of float64 tensors (``params`` maps the
  layer's parameter names — ``weight``, ``q.bias`` — to tensors) returning y; autograd of
  ⟨w, y⟩ gives the reference gradients; each must match to ``rtol`` (norm-wise).
- no reference: for ``directions`` random directions v (each tensor's part scaled by its
  RMS), the directional derivative ⟨∇L, v⟩ against central differences of L along v at steps
  ε and ε/2, combined by Richardson extrapolation, the losses summed in float64 from the
  float32 forward; the allowed error is ``rtol`` of the derivative, plus what float32 rounding
  of L can do over the step (20·u·Σ|wᵢyᵢ| / (ε/2)), plus the two differences' disagreement
  (what the loss's curvature costs at that step: large only where it is not smooth).

Returns a ``GradReport`` (the errors by tensor); ``check=True`` (default) raises
``GradcheckError`` naming the worst tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nntile_lab.nn import backend
from nntile_lab.nn.backend import BFLOAT16
from nntile_lab.nn.module import Module
from nntile_lab.nn.policy import StepPolicy
from nntile_lab.nn.precision import Casts

U = 2.0 ** -24   # float32's unit roundoff


class GradcheckError(AssertionError):
    """A backward that disagrees with its reference (the message names the tensor)."""


@dataclass
class GradReport:
    """Errors by tensor (norm-wise relative to the reference, or per direction)."""

    errors: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    method: str = ""

    @property
    def ok(self) -> bool:
        return all(self.errors[k] <= self.limits[k] for k in self.errors)

    def worst(self) -> str:
        return max(self.errors, key=lambda k: self.errors[k] / max(self.limits[k], 1e-300))

    def __str__(self) -> str:
        rows = [f"  {k:<28} {self.errors[k]:.3e} (limit {self.limits[k]:.1e})"
                for k in self.errors]
        return f"gradcheck ({self.method}):\n" + "\n".join(rows)


class _Harness(Module):
    """A one-layer model: what a step policy needs around ``layer``."""

    def __init__(self, layer, precision: str):
        super().__init__()
        self.layer = layer
        self.runtime = backend.runtime()
        self.casts = Casts(precision)
        self.stages = self.stage_modules()
        for path, m in layer.named_modules():
            m.path = path or type(layer).__name__

    def forward(self, *values, **kw):
        return self.layer(*values, **kw)


def gradcheck(layer, inputs, *, tiles=None, reference=None, kwargs=None, seed: int = 0,
              rtol: float | None = None, directions: int = 3, eps: float = 1e-3,
              check: bool = True) -> GradReport:
    """Check ``layer``'s backward (see the module docstring); needs a running Runtime.
    ``rtol``: 1e-4 against PyTorch (float32 against float64), 1e-3 against differences
    (their truncation error, O(ε²), on top of the rounding they are given room for)."""
    kwargs = kwargs or {}
    if rtol is None:
        rtol = 1e-4 if reference is not None else 1e-3
    inputs = [np.ascontiguousarray(a) for a in inputs]
    tiles = list(tiles) if tiles is not None else [None] * len(inputs)
    if len(tiles) != len(inputs):
        raise ValueError(f"gradcheck: {len(tiles)} tile shapes for {len(inputs)} inputs")
    rng = np.random.default_rng(seed)
    harness = _Harness(layer, "fp32")
    params = {name.removeprefix("layer."): p for name, p in harness.named_parameters().items()}
    for p in params.values():
        p.value = backend.from_numpy(p.init.draw(p.shape, rng), p.tile_shape)
        p.grad = backend.empty(p.shape, p.tile_shape)
        p.value16 = None
    try:
        y, w, grads = _step(harness, inputs, tiles, kwargs, rng)
        if reference is not None:
            report = _against_torch(reference, inputs, params, w, grads, rtol, layer.is_loss
                                    if hasattr(layer, "is_loss") else False)
        else:
            report = _against_differences(harness, inputs, tiles, kwargs, params, y, w, grads,
                                          rng, rtol, directions, eps)
    finally:
        for p in params.values():
            for t in (p.value, p.grad):
                t.free()
            p.value = p.grad = None
    if check and not report.ok:
        k = report.worst()
        raise GradcheckError(f"{type(layer).__name__}: the gradient of {k} is off by "
                             f"{report.errors[k]:.3e} (limit {report.limits[k]:.1e})\n{report}")
    return report


def _float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _run(harness, inputs, tiles, kwargs, *, training: bool):
    """A step of the harness: the policy, the tape, the input values and the output."""
    step = StepPolicy(harness, training=training)
    if training:
        step.start_gradients(accumulate=False)
    with step.forward() as tape:
        values = [tape.input(backend.from_numpy(a, t), f"input {i}",
                             requires_grad=training and _float(a))
                  for i, (a, t) in enumerate(zip(inputs, tiles))]
        out = harness(*values, **kwargs)
    return step, values, out


def _loss_of(y: np.ndarray, w: np.ndarray | None) -> float:
    return float(np.sum(y.astype(np.float64))) if w is None else \
        float(np.sum(w.astype(np.float64) * y.astype(np.float64)))


def _step(harness, inputs, tiles, kwargs, rng):
    """Forward, then backward from dL/dy = w: (y, w, {name: gradient})."""
    step, values, out = _run(harness, inputs, tiles, kwargs, training=True)
    y_t = out.tensor
    y = y_t.to_numpy().astype(np.float32) if y_t.dtype != BFLOAT16 else y_t.to_numpy()
    is_loss = harness.layer.is_loss if hasattr(harness.layer, "is_loss") else False
    w, seed = None, None
    if not is_loss:
        w = rng.standard_normal(y.shape).astype(np.float32)
        seed = {out: backend.from_numpy(w, y_t.tile_shape)}
    keep = [v for v in values if v.requires_grad]
    kept = step.tape.backward(seed=seed, keep=keep)
    grads = {}
    for i, v in enumerate(values):
        if v.requires_grad:
            g = kept.get(v.uid)
            grads[f"input {i}"] = (np.zeros(inputs[i].shape, np.float32) if g is None
                                   else g.to_numpy())
            if g is not None:
                g.storage.free()
    for name, p in harness.named_parameters().items():
        grads[name.removeprefix("layer.")] = p.grad.to_numpy()
    del out, values
    return y, w, grads


def _against_torch(reference, inputs, params, w, grads, rtol, is_loss) -> GradReport:
    try:
        import torch
    except ImportError as exc:   # optional: the check falls back to finite differences
        raise ImportError("gradcheck(reference=...) needs PyTorch; leave reference out for "
                          "finite differences") from exc
    values = {n: p.value.to_numpy() for n, p in params.items()}

    def autograd(dtype):
        ts = [torch.tensor(a.astype(dtype) if _float(a) else a, requires_grad=_float(a))
              for a in inputs]
        ps = {n: torch.tensor(v.astype(dtype), requires_grad=True) for n, v in values.items()}
        y = reference(*ts, ps)
        loss = y.sum() if is_loss or w is None else (y * torch.tensor(w.astype(dtype))).sum()
        loss.backward()
        out = {f"input {i}": t.grad for i, t in enumerate(ts) if t.requires_grad}
        out |= {n: t.grad for n, t in ps.items()}
        return {n: np.zeros(grads[n].shape) if g is None else g.numpy().astype(np.float64)
                for n, g in out.items()}
    refs, refs32 = autograd(np.float64), autograd(np.float32)
    report = GradReport(method="against PyTorch autograd, float64")
    # norm-wise relative, with a floor: a gradient that is zero but for rounding (a
    # one-wide layer norm's γ) is measured against the layer's largest gradient
    floor = 1e-3 * max([np.linalg.norm(r) for r in refs.values()] + [1e-300])
    for name, g in grads.items():
        den = max(float(np.linalg.norm(refs[name])), floor)
        report.errors[name] = float(np.linalg.norm(g - refs[name]) / den)
        # what float32 rounding does to this gradient, measured on PyTorch's own float32
        # run (cancellation in a narrow layer norm, a sharp softmax): allowed ×10
        report.limits[name] = max(rtol, 10 * float(np.linalg.norm(refs32[name] - refs[name])
                                                   / den))
    return report


def _against_differences(harness, inputs, tiles, kwargs, params, y, w, grads, rng, rtol,
                         directions, eps) -> GradReport:
    report = GradReport(method=f"central differences along {directions} random directions")
    names = [n for n in grads if not n.startswith("input ")] + \
        [f"input {i}" for i, a in enumerate(inputs) if _float(a)]
    base = {n: params[n].value.to_numpy() for n in params}
    base |= {f"input {i}": a for i, a in enumerate(inputs) if _float(a)}
    for d in range(directions):
        v = {}
        for n in names:
            scale = float(np.sqrt(np.mean(base[n].astype(np.float64) ** 2))) or 1.0
            v[n] = rng.standard_normal(base[n].shape) * scale
        exact = sum(float(np.sum(grads[n].astype(np.float64) * v[n])) for n in names)
        estimates, mags = [], []
        for h in (eps, eps / 2):
            losses = []
            for sign in (1, -1):
                moved = {n: (base[n] + sign * h * v[n]).astype(np.float32) for n in names}
                for n in params:
                    params[n].value.copy_from_numpy(moved[n])
                ins = [moved.get(f"input {i}", a) for i, a in enumerate(inputs)]
                yy = _forward(harness, ins, tiles, kwargs)
                losses.append(_loss_of(yy, w))
                mags.append(float(np.sum(np.abs(yy.astype(np.float64)
                                                * (1.0 if w is None else w)))))
            estimates.append((losses[0] - losses[1]) / (2 * h))
        for n in params:
            params[n].value.copy_from_numpy(base[n])
        # Richardson: (4·D(ε/2) − D(ε))/3 cancels the ε² term; |D(ε) − D(ε/2)| is what the
        # loss's curvature costs at this step — large only where the loss is not smooth at
        # the scale of ε (a layer norm of two nearly equal values), where no difference is
        # a fair judge; a wrong backward on a smooth loss stays caught
        estimate = (4 * estimates[1] - estimates[0]) / 3
        curvature = abs(estimates[0] - estimates[1])
        noise = 20 * U * max(mags) / (eps / 2)
        key = f"direction {d}"
        report.errors[key] = abs(estimate - exact)
        report.limits[key] = rtol * abs(exact) + noise + curvature
    return report


def _forward(harness, inputs, tiles, kwargs) -> np.ndarray:
    """The output of a forward-only step, as numpy."""
    step, values, out = _run(harness, inputs, tiles, kwargs, training=False)
    y = out.tensor.to_numpy()
    del out, values
    return y
