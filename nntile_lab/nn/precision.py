"""What a training step computes and keeps in bf16, by precision mode (docs/precision.md).

The modes (``spec.PRECISIONS`` less ``auto``, which resolves to one of them):

- ``fp32``: everything float32.
- ``bf16``: every GEMM takes bf16 operands and sums in float32 (``gemm_bf16``); the
  activations a GEMM consumes are saved as the bf16 copy it reads anyway, and so are the
  GELU input and the SwiGLU gate's two inputs; softmax, layer norm, GELU, the loss and
  every GEMM output but the logits are float32; master weights, gradients and optimizer
  state float32, with a bf16 copy of each GEMM weight made after the optimizer updates it.
- ``bf16-storage``: the same activations saved in bf16, every computation float32 (each
  saved tensor widened, exactly, where the backward reads it): for CPUs whose bf16 GEMM
  is not faster than sgemm, where bf16 still halves what the step keeps.

In both bf16 modes the logits and their gradient, a step's largest tensors (B·T·V), are
stored in bf16: the head's GEMM rounds its float32 sums once when it stores them, the
cross-entropy reads them widened and computes in float32 (as PyTorch's autocast does:
a bf16 linear output, a float32 loss).

The residual stream (each block's input and its mid-block sum, the layer norms' inputs),
the layer norms' statistics and the attention probabilities (softmax's backward reads
them: ``nn.attention`` says why) stay float32 in every mode, as under PyTorch's autocast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nntile_lab.nn.backend import BFLOAT16, ops
from nntile_lab.spec import PRECISIONS

if TYPE_CHECKING:
    from nntile_lab.nn.policy import LeafContext as Stage
    from nntile_lab.tensor import TiledTensor

MODES = tuple(p for p in PRECISIONS if p != "auto")
F32 = np.dtype(np.float32)


def check_mode(mode: str) -> str:
    """``mode`` if it is a resolved precision mode; else one clear error."""
    if mode == "auto":
        raise ValueError("precision='auto' is resolved before a model is built "
                         "(nntile_lab.precision_peak.choose_precision): give the model one of "
                         f"{', '.join(MODES)}")
    if mode not in MODES:
        raise ValueError(f"precision={mode!r} is unknown; valid ones: {', '.join(MODES)} "
                         "(and 'auto' in a spec)")
    return mode


class Casts:
    """The conversions a step makes under one mode; every converted tensor is a
    temporary of the stage that asks for it (or, ``keep``, the saved form)."""

    def __init__(self, mode: str):
        self.mode = check_mode(mode)
        self.gemm_bf16 = mode == "bf16"
        self.store_bf16 = mode != "fp32"

    def keep(self, t: TiledTensor, s: Stage) -> TiledTensor:
        """The form of the float32 ``t`` that the step saves for its backward: a bf16
        copy under a bf16 mode (then ``t`` is a temporary of ``s``, usable until the stage
        ends), else ``t`` (also when ``t`` is bf16 already: the fused GELU's output)."""
        if not self.store_bf16 or t.dtype == BFLOAT16:
            return t
        out = ops.to_bf16(t)
        s.temp(t)
        return out

    def operand(self, t: TiledTensor, s: Stage, fp32: TiledTensor | None = None) -> TiledTensor:
        """``t`` as a GEMM operand: bf16 in mode ``bf16``, else float32. ``fp32`` is the
        float32 tensor a bf16 ``t`` was kept from, when it is still alive (no widening)."""
        want = BFLOAT16 if self.gemm_bf16 else F32
        if t.dtype == want:
            return t
        if want == F32 and fp32 is not None:
            return fp32
        return s.temp(ops.to_bf16(t) if want == BFLOAT16 else ops.to_f32(t))

    def gelu(self, x: TiledTensor) -> tuple[TiledTensor, TiledTensor]:
        """GELU of the float32 ``x`` (the MLP's hidden tile): ``(x as its record keeps it,
        gelu(x) as the next layer takes it)``. Under ``bf16`` one fused pass writes both in
        bf16 (``ops.gelu_bf16``) and no float32 GELU exists; under ``bf16-storage`` ``x``
        is kept as a bf16 copy and the GELU is float32."""
        if self.gemm_bf16:
            return ops.gelu_bf16(x)
        y = ops.gelu(x)
        return (ops.to_bf16(x) if self.store_bf16 else x), y

    def silu_gate(self, g: TiledTensor, u: TiledTensor):
        """SwiGLU's silu(g)·u of the float32 ``g`` and ``u`` (a gated MLP's two hidden
        tiles): ``(g, u as the record keeps them, the product as the next layer takes it)``.
        Under ``bf16`` one fused pass writes all three in bf16 (``ops.silu_gate_bf16``);
        under ``bf16-storage`` g and u are kept as bf16 copies and the product is float32."""
        if self.gemm_bf16:
            return ops.silu_gate_bf16(g, u)
        y = ops.silu_gate(g, u)
        if self.store_bf16:
            return ops.to_bf16(g), ops.to_bf16(u), y
        return g, u, y

    def logits_dtype(self, xf: TiledTensor):
        """The dtype the head stores its logits (and so their gradient) in: bf16 under a
        bf16 mode — written by the head's GEMM from its float32 sums (``gemm_bf16_c16``,
        ``gemm_c16``), read by cross-entropy kernels that compute in float32 — where
        n_embd is one tile (the head's sums then stay inside one task); else float32."""
        return BFLOAT16 if self.store_bf16 and xf.grid_shape[-1] == 1 else F32

    def head_gradient(self, dlogits: TiledTensor, s: Stage) -> TiledTensor:
        """∂loss/∂logits as the head backward's two GEMMs read it: a bf16 one as it is
        (``gemm_bf16`` under ``bf16``; under ``bf16-storage`` ``gemm_a16`` widens it
        inside each task, so no float32 copy of the B·T·V gradient exists), else
        ``operand``."""
        return dlogits if dlogits.dtype == BFLOAT16 else self.operand(dlogits, s)

    @staticmethod
    def silu_gate_backward(g, u, dy, dg=None, du=None, beta: float = 0.0):
        """(dg, du) from ``g`` and ``u`` as kept (bf16 ones read by the fused kernel)."""
        if g.dtype == BFLOAT16:
            return ops.silu_gate_backward_bf16(g, u, dy, dg, du, beta=beta)
        return ops.silu_gate_backward(g, u, dy, dg, du, beta=beta)

    @staticmethod
    def gelu_backward(fc: TiledTensor, dy: TiledTensor) -> TiledTensor:
        """dfc = dy·gelu'(fc) from ``fc`` as kept (a bf16 one read by the fused kernel)."""
        if fc.dtype == BFLOAT16:
            return ops.gelu_backward_bf16(fc, dy)
        return ops.gelu_backward(fc, dy)
