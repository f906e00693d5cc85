"""What a training step keeps from the forward for the backward, as typed records.

Each field declares its shape in the model's letters (B batch, T sequence, E n_embd,
H heads, D head size, F n_inner) and its dtype; a field marked ``bf16`` is kept in
bfloat16 under the precision modes that store activations in bf16 (``bf16``,
``bf16-storage``: ``nn.precision``), in its declared dtype under ``fp32``. The model
fills these records; the memory planner (``nntile_lab.memory``) sizes them from the
same declarations with ``nbytes``, so the planner and the model cannot disagree about
what is saved (tests/nn/test_activations.py checks both against StarPU's own memory accounting).

This module imports no compiled code: the planner runs without StarPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

if TYPE_CHECKING:
    from nntile_lab.nn.config import GPT2Config
    from nntile_lab.tensor import TiledTensor


BF16 = np.dtype(ml_dtypes.bfloat16)
# the modes that keep the ``bf16`` fields in bfloat16 (spec.PRECISIONS; "auto" is resolved
# before anything is sized)
STORE_BF16 = ("bf16", "bf16-storage")


def _saved(shape: str, dtype=np.float32, bf16: bool = False):
    return field(metadata={"shape": tuple(shape.split()), "dtype": np.dtype(dtype),
                           "bf16": bf16})


def _dtype(f, precision: str) -> np.dtype:
    if precision == "auto":
        raise ValueError("precision='auto' must be resolved to a mode before sizing what a "
                         "step keeps")
    return BF16 if f.metadata["bf16"] and precision in STORE_BF16 else f.metadata["dtype"]


class _Record:
    """Shared behaviour of the records below (dataclasses of tiled tensors)."""

    @classmethod
    def shapes(cls, config: GPT2Config, batch: int, seq_len: int,
               precision: str = "fp32") -> dict:
        """``{field: (shape, dtype)}`` of a step of ``batch × seq_len`` tokens."""
        dims = {"B": batch, "T": seq_len, "E": config.n_embd, "H": config.n_head,
                "D": config.head_size, "F": config.n_inner}
        return {f.name: (tuple(dims[d] for d in f.metadata["shape"]), _dtype(f, precision))
                for f in fields(cls)}

    @classmethod
    def nbytes(cls, config: GPT2Config, batch: int, seq_len: int,
               precision: str = "fp32") -> int:
        """Bytes of one record of a step of ``batch × seq_len`` tokens."""
        return sum(math.prod(shape) * dtype.itemsize
                   for shape, dtype in cls.shapes(config, batch, seq_len, precision).values())

    def tensors(self) -> list[TiledTensor]:
        return [getattr(self, f.name) for f in fields(self)]

    def free(self) -> None:
        """Free every tensor (a view's whole storage) once the tasks using it are done.
        A tile StarPU allocated (no home node) is dropped by its free, never written
        back to disk, so no invalidate hint is needed first."""
        for t in self.tensors():
            t.storage.free()


@dataclass
class Batch(_Record):
    """The step's tokens: inputs, targets and their positions."""

    ids: TiledTensor = _saved("B T", np.int64)
    labels: TiledTensor = _saved("B T", np.int64)
    pos: TiledTensor = _saved("B T", np.int64)


@dataclass
class BlockActivations(_Record):
    """One block's forward, kept for its backward:
    h = x + c_proj(attention(ln_1(x))),  out = h + c_proj(gelu(c_fc(ln_2(h))))."""

    # bf16 where a GEMM reads it (the copy the GEMM takes anyway) and the GELU input (read
    # by the fused bf16 GELU backward); float32: the residual stream (x, h: layer norm
    # inputs), the statistics, and the attention probabilities, which softmax's backward
    # reads: rounded, a row no longer sums to 1, and dscores = att·(datt − Σ att·datt)
    # then no longer sums to 0 — an error along each row's constant that dq = dscores·k
    # turns into a bias, not noise (PyTorch's autocast keeps them float32 as well)
    x: TiledTensor = _saved("B T E")             # the block's input
    ln1: TiledTensor = _saved("B T E", bf16=True)    # ln_1(x)
    ln1_mean: TiledTensor = _saved("B T")
    ln1_inv_std: TiledTensor = _saved("B T")     # 1/√(var + eps)
    q: TiledTensor = _saved("B H T D", bf16=True)
    k: TiledTensor = _saved("B H T D", bf16=True)
    v: TiledTensor = _saved("B H T D", bf16=True)
    att: TiledTensor = _saved("B H T T")         # softmax(mask(q·kᵀ/√D))
    y: TiledTensor = _saved("B T E", bf16=True)  # att·v, heads merged: c_proj's input
    h: TiledTensor = _saved("B T E")             # x + c_proj(y)
    ln2: TiledTensor = _saved("B T E", bf16=True)    # ln_2(h)
    ln2_mean: TiledTensor = _saved("B T")
    ln2_inv_std: TiledTensor = _saved("B T")
    fc: TiledTensor = _saved("B T F", bf16=True)     # c_fc(ln2)
    gelu: TiledTensor = _saved("B T F", bf16=True)   # gelu(fc): the MLP's c_proj input


@dataclass
class HeadActivations(_Record):
    """The final layer norm's input and output, kept for the tied head's backward."""

    x: TiledTensor = _saved("B T E")             # the last block's output
    xf: TiledTensor = _saved("B T E", bf16=True)     # ln_f(x): the head GEMMs' input
    mean: TiledTensor = _saved("B T")
    inv_std: TiledTensor = _saved("B T")


@dataclass
class Activations:
    """Everything a step's forward keeps: its batch, every block's record, the head's."""

    batch: Batch
    blocks: list[BlockActivations]
    head: HeadActivations

    @staticmethod
    def nbytes(config: GPT2Config, batch: int, seq_len: int, precision: str = "fp32") -> int:
        """Bytes kept by the forward of a step of ``batch × seq_len`` tokens."""
        return (Batch.nbytes(config, batch, seq_len, precision)
                + config.n_layer * BlockActivations.nbytes(config, batch, seq_len, precision)
                + HeadActivations.nbytes(config, batch, seq_len, precision))

    def tensors(self) -> list[TiledTensor]:
        return [*self.batch.tensors(), *(t for b in self.blocks for t in b.tensors()),
                *self.head.tensors()]

    def free(self) -> None:
        for t in self.tensors():
            t.storage.free()
