"""Task priorities of a training step, from its task graph (``Runtime(priorities=True)``).

A step's graph is a chain of stages: forward through layers 0…L (L = the final layer
norm, the tied head and the loss), backward through L…0, then the optimizer (which
waits for every gradient: ``grad_norm`` reads them all). A task's priority is its
stage's *bottom level*, the number of stages on the longest path from it to the end
of the step, so that a priority-aware scheduler (prio, lws, dmdas, dmdasd) runs the
critical path first and keeps off-path work as filler for the gaps:

    forward layer l            2L + 4 − l   (layer 0 highest: everything waits on it)
    backward layer l (dx path)  3 + l       (the head's backward L first)
    zeroing the gradients       2           (needed only by the accumulations below)
    weight gradients            1           (dW += xᵀ·dy, db += Σ dy, embeddings: they
                                             feed only the optimizer, no later layer)
    optimizer                   0
    gradient-norm chain         2L + 5      (highest: Σ g² over every gradient, one
                                             serial chain that gates the optimizer; its
                                             tasks are short and run as each gradient
                                             is done, not all after the backward)

Priorities only reorder tasks that do not depend on each other; every task's result
depends only on its inputs' values (no atomics; the one commuting access, the embedding
lookup, copies each row from exactly one vocabulary tile), so results are bit-identical
with and without them (tests/nn/test_priorities.py).
"""
from __future__ import annotations

OPTIMIZER = 0
WEIGHT_GRAD = 1
ZERO_GRAD = 2


def forward(layer: int, n_layer: int) -> int:
    """Priority of forward layer ``layer`` (0…n_layer, n_layer = final norm, head, loss)."""
    _check(layer, n_layer)
    return 2 * n_layer + 4 - layer


def backward(layer: int, n_layer: int) -> int:
    """Priority of the input-gradient (dx) path of backward layer ``layer``."""
    _check(layer, n_layer)
    return 3 + layer


def grad_norm(n_layer: int) -> int:
    """Priority of the gradient-norm accumulation (above every stage)."""
    return 2 * n_layer + 5


def _check(layer: int, n_layer: int) -> None:
    if not 0 <= layer <= n_layer:
        raise ValueError(f"layer={layer} must be from 0 to n_layer={n_layer} (n_layer is the "
                         "head)")
