"""What a training step keeps from the forward for the backward, as typed records.

Each field declares its shape in the model's letters (B batch, T sequence, E n_embd,
H heads, D head size, F n_inner) and its dtype. The model fills these records; the
memory planner (``nntile_lab.memory``) sizes them from the same declarations with
``nbytes``, so the planner and the model cannot disagree about what is saved
(tests/nn/test_activations.py checks both against StarPU's own memory accounting).

This module imports no compiled code: the planner runs without StarPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from nntile_lab.nn.config import GPT2Config
    from nntile_lab.tensor import TiledTensor


def _saved(shape: str, dtype=np.float32):
    return field(metadata={"shape": tuple(shape.split()), "dtype": np.dtype(dtype)})


class _Record:
    """Shared behaviour of the records below (dataclasses of tiled tensors)."""

    @classmethod
    def shapes(cls, config: GPT2Config, batch: int, seq_len: int) -> dict:
        """``{field: (shape, dtype)}`` of a step of ``batch × seq_len`` tokens."""
        dims = {"B": batch, "T": seq_len, "E": config.n_embd, "H": config.n_head,
                "D": config.head_size, "F": config.n_inner}
        return {f.name: (tuple(dims[d] for d in f.metadata["shape"]), f.metadata["dtype"])
                for f in fields(cls)}

    @classmethod
    def nbytes(cls, config: GPT2Config, batch: int, seq_len: int) -> int:
        """Bytes of one record of a step of ``batch × seq_len`` tokens."""
        return sum(math.prod(shape) * dtype.itemsize
                   for shape, dtype in cls.shapes(config, batch, seq_len).values())

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

    x: TiledTensor = _saved("B T E")             # the block's input
    ln1: TiledTensor = _saved("B T E")           # ln_1(x)
    ln1_mean: TiledTensor = _saved("B T")
    ln1_inv_std: TiledTensor = _saved("B T")     # 1/√(var + eps)
    q: TiledTensor = _saved("B H T D")
    k: TiledTensor = _saved("B H T D")
    v: TiledTensor = _saved("B H T D")
    att: TiledTensor = _saved("B H T T")         # softmax(mask(q·kᵀ/√D))
    y: TiledTensor = _saved("B T E")             # att·v, heads merged: c_proj's input
    h: TiledTensor = _saved("B T E")             # x + c_proj(y)
    ln2: TiledTensor = _saved("B T E")           # ln_2(h)
    ln2_mean: TiledTensor = _saved("B T")
    ln2_inv_std: TiledTensor = _saved("B T")
    fc: TiledTensor = _saved("B T F")            # c_fc(ln2)
    gelu: TiledTensor = _saved("B T F")          # gelu(fc): the MLP's c_proj input


@dataclass
class HeadActivations(_Record):
    """The final layer norm's input and output, kept for the tied head's backward."""

    x: TiledTensor = _saved("B T E")             # the last block's output
    xf: TiledTensor = _saved("B T E")            # ln_f(x)
    mean: TiledTensor = _saved("B T")
    inv_std: TiledTensor = _saved("B T")


@dataclass
class Activations:
    """Everything a step's forward keeps: its batch, every block's record, the head's."""

    batch: Batch
    blocks: list[BlockActivations]
    head: HeadActivations

    @staticmethod
    def nbytes(config: GPT2Config, batch: int, seq_len: int) -> int:
        """Bytes kept by the forward of a step of ``batch × seq_len`` tokens."""
        return (Batch.nbytes(config, batch, seq_len)
                + config.n_layer * BlockActivations.nbytes(config, batch, seq_len)
                + HeadActivations.nbytes(config, batch, seq_len))

    def tensors(self) -> list[TiledTensor]:
        return [*self.batch.tensors(), *(t for b in self.blocks for t in b.tensors()),
                *self.head.tensors()]

    def free(self) -> None:
        for t in self.tensors():
            t.storage.free()
