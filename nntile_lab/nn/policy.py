"""Where a training step frees tensors, which stage and priority each task gets, and
which memory hints fire — so that ``nn.gpt2`` shows the math only.

The model runs each stage of its step inside this policy::

    step = StepPolicy(runtime, params, grads, backward=True)
    step.start_gradients(accumulate=False)
    with step.block_forward(i, x) as s:        # tasks tagged (layer i, forward)
        y = s.temp(linear(x, w))               # freed when the stage ends
        ...
        s.save(acts, after=out)                # kept for the backward (or freed)

A stage is the scope ``Runtime.scope(layer, phase, priority)`` and an arena: the
tensors given to ``temp`` or ``drop`` are freed when it ends (a free waits for the
tasks already submitted that use the tensor, so this is as early as freeing each one
after its last use). Priorities come from ``nn.priorities`` when the runtime has them on.

The memory hints (``Runtime(hints=...)``, spec.HINTS) and why each fires where it does,
for StarPU 1.3 out of core:

- ``prefetch``: when a block's stage starts, the parameters of the block that runs
  next (forward: the one above; backward: the one below) are brought into RAM, once
  the tasks writing the stage's input are done. Parameters only: StarPU 1.3 aborts when
  a tile with a prefetch and a wont_use push to disk in flight is unregistered, as
  saved activations are.
- ``wont_use``: a block's saved activations, once the block's output is written (read
  again only in the backward; not the last block's, which the backward reads first);
  a block's parameters and gradients after its backward (next needed by the optimizer).
- ``drop_grads``: each gradient is zeroed (a W-mode fill, ordered after the gradient
  flowing into its stage) just before the first task that adds to it, instead of all
  at the step's start: a gradient is never held through the forward, where it would be
  evicted and read back as zeros. With ``accumulate`` the gradients are added to, so
  nothing is zeroed.
- ``invalidate`` fires in the optimizer (gradients dropped once the update read them);
  here it only forbids accumulating into dropped gradients.

Temporaries need no hint before their free: a tile StarPU allocated (no home node) is
dropped by its free, never written back.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from nntile_lab import ops
from nntile_lab.nn import priorities

if TYPE_CHECKING:
    from nntile_lab.nn.gpt2 import Weights
    from nntile_lab.runtime import Runtime
    from nntile_lab.tensor import TiledTensor


class Stage:
    """One stage of a step (yielded by the ``StepPolicy`` stage methods): its arena of
    tensors to free when it ends, and the weight-gradient scope."""

    def __init__(self, policy: StepPolicy):
        self._policy = policy
        self._frees: list = []
        self._saved: list = []   # (record, the stage's output)

    def temp(self, t: TiledTensor) -> TiledTensor:
        """``t``, freed when the stage ends (a view: its whole storage)."""
        self._frees.append(t)
        return t

    def drop(self, record) -> None:
        """Free a saved record (``nn.activations``) when the stage ends: its last reader
        has been submitted."""
        self._frees.extend(record.tensors())

    def save(self, record, after: TiledTensor) -> None:
        """``record`` is what this stage keeps for the backward; ``after`` is the stage's
        output. Without a backward it is freed instead."""
        if self._policy.backward:
            self._saved.append((record, after))
        else:
            self.drop(record)

    def weight_grads(self):
        """Scope of the weight-gradient accumulations (dW += xᵀ·dy, db += Σ dy, the
        embeddings'): off the critical path — they feed only the optimizer — so with
        priorities on they fill the gaps of the dx chain."""
        return self._policy.scope(priority=priorities.WEIGHT_GRAD)

    def _free(self) -> None:
        for t in self._frees:
            t.storage.free()
        self._frees.clear()


class StepPolicy:
    """The stages of one forward (and backward) of a GPT-2 over ``params``/``grads``
    (``nn.gpt2.Weights``): their scopes, arenas, memory hints and gradient zeroing."""

    def __init__(self, runtime: Runtime, params: Weights, grads: Weights, *,
                 backward: bool):
        self.runtime, self.params, self.grads = runtime, params, grads
        self.backward, self.hints = backward, runtime.hints
        self.n_layer = len(params.blocks)
        self.lazy_zero = False

    def start_gradients(self, accumulate: bool) -> None:
        """Before a step's forward: zero the gradients (now, or with ``drop_grads`` each
        one just before its first accumulation), or, ``accumulate``, add to them."""
        if accumulate and any(g.storage.dropped for g in self.grads.tensors()):
            raise RuntimeError("accumulate=True after the optimizer dropped the gradients "
                               "(the invalidate hint): the first micro-batch of a step must "
                               "not accumulate")
        self.lazy_zero = "drop_grads" in self.hints and not accumulate
        if not accumulate and not self.lazy_zero:
            with self.scope(phase="backward", priority=priorities.ZERO_GRAD):
                for g in self.grads.tensors():
                    ops.fill(g, 0.0)

    # ---- forward ---------------------------------------------------------------------
    def embedding_forward(self):
        return self._stage(0, "forward")

    @contextmanager
    def block_forward(self, i: int, x: TiledTensor):
        """Block ``i``'s forward; ``x`` its input."""
        if "prefetch" in self.hints and i + 1 < self.n_layer:
            for t in self.params.blocks[i + 1].tensors():
                t.prefetch(after=x)
        with self._stage(i, "forward") as stage:
            yield stage
        if "wont_use" in self.hints and i + 1 < self.n_layer:
            for record, out in stage._saved:
                for t in record.tensors():
                    t.wont_use(after=out)

    def head_forward(self):
        """The final layer norm, the tied head and the loss."""
        return self._stage(self.n_layer, "forward")

    # ---- backward --------------------------------------------------------------------
    @contextmanager
    def head_backward(self, dlogits: TiledTensor, saved):
        """The head's backward from ``dlogits``; then ``dlogits`` and the head's record
        ``saved`` are dead (freed at the end). It adds first to wte's and ln_f's
        gradients (wte's again in the embeddings' backward)."""
        g = self.grads
        with self._stage(self.n_layer, "backward", zero=[g.wte, *g.ln_f.tensors()],
                         after=dlogits) as stage:
            stage.temp(dlogits)
            stage.drop(saved)
            yield stage

    @contextmanager
    def block_backward(self, i: int, dx: TiledTensor, saved):
        """Block ``i``'s backward; ``dx`` the gradient flowing in (and out: in place);
        the block's record ``saved`` is dead after it (freed at the end)."""
        if "prefetch" in self.hints and i > 0:
            for t in self.params.blocks[i - 1].tensors():
                t.prefetch(after=dx)
        with self._stage(i, "backward", zero=self.grads.blocks[i].tensors(),
                         after=dx) as stage:
            stage.drop(saved)
            yield stage
        if "wont_use" in self.hints:
            for t in (*self.params.blocks[i].tensors(), *self.grads.blocks[i].tensors()):
                t.wont_use(after=dx)

    @contextmanager
    def embedding_backward(self, dx: TiledTensor, batch):
        """The embeddings' gradients, weight gradients only; the last stage of the step:
        ``dx`` and the ``batch`` record are freed at its end."""
        stage_scope = self._stage(0, "backward", zero=[self.grads.wpe], after=dx)
        with stage_scope as stage, stage.weight_grads():
            stage.temp(dx)
            stage.drop(batch)
            yield stage

    # ---- scopes ------------------------------------------------------------------------
    def scope(self, *, layer: int | None = None, phase: str | None = None,
              priority: int | None = None):
        """``Runtime.scope``, the priority dropped when the runtime has priorities off."""
        return self.runtime.scope(layer=layer, phase=phase,
                                  priority=priority if self.runtime.priorities else None)

    @contextmanager
    def _stage(self, layer: int, phase: str, zero=(), after: TiledTensor | None = None):
        """The scope and arena of one stage (priority: the stage's bottom level, see
        nn.priorities); with lazy zeroing, first ``zero`` — the gradients this stage
        adds to first — ordered after ``after``."""
        if self.lazy_zero and zero:
            with self.scope(layer=layer, phase=phase, priority=priorities.ZERO_GRAD):
                for t in zero:
                    ops.fill(t, 0.0, after=after)
        rank = priorities.forward if phase == "forward" else priorities.backward
        stage = Stage(self)
        with self.scope(layer=layer, phase=phase, priority=rank(layer, self.n_layer)):
            try:
                yield stage
            finally:
                stage._free()
