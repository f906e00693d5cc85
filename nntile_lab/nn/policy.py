"""Which stage, priority and memory hints a step's tasks get — for any model built from
layers, from its module tree — so that layers and models show the math only.

A step runs inside a policy::

    step = StepPolicy(model, training=True)
    step.start_gradients(accumulate=False)
    with step.forward():                       # the tape records, stages are scoped
        loss = model(**inputs)
    step.backward()                            # the recorded leaves' backwards, reversed

**Stages.** The items of the model's ModuleLists (GPT-2's blocks) are its stages, in the
order the forward calls them: stage k's tasks carry trace layer k. What runs before the
first stage (embeddings) is layer 0 too, what runs after the last (final norm, head, loss)
is layer S, S = the number of stages; a task's phase is forward or backward. Each stage's
priority is its bottom level in the step's chain of stages (``nn.priorities``), so a
priority-aware scheduler runs the critical path first; weight-gradient accumulations
(``ctx.weight_grads()``) and gradient zero fills sit below every stage.

**Frees.** A leaf's temporaries (``ctx.temp``) are freed when its forward or backward ends;
the values between leaves, the saved records and the gradients when their last holder lets
them go (``nn.tape``). A free waits for the tasks already submitted that use the tensor, so
this frees memory as early as freeing each tensor after its last use.

The memory hints (``Runtime(hints=...)``, spec.HINTS) and why each fires where it does,
for StarPU 1.3 out of core:

- ``prefetch``: when a stage starts, the parameters of the stage that runs next (forward:
  the one after; backward: the one before) are brought into RAM, once the tasks writing
  the stage's input are done. Parameters only: StarPU 1.3 aborts when a tile with a
  prefetch and a wont_use push to disk in flight is unregistered, as saved activations are.
- ``wont_use``: a stage's saved activations, once the stage's output is written (read
  again only in the backward; not the last stage's, which the backward reads first); a
  stage's parameters and gradients after its backward (next needed by the optimizer).
- ``drop_grads``: each gradient is zeroed (a W-mode fill, ordered after the gradient
  flowing into its stage) just before the stage whose backward first adds to it, instead
  of all at the step's start: a gradient is never held through the forward, where it would
  be evicted and read back as zeros. With ``accumulate`` the gradients are added to, so
  nothing is zeroed.
- ``invalidate`` fires in the optimizer (gradients dropped once the update read them);
  here it only forbids accumulating into dropped gradients.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from nntile_lab.nn import backend, priorities
from nntile_lab.nn.backend import BFLOAT16, ops
from nntile_lab.nn.tape import Tape, set_current

if TYPE_CHECKING:
    from nntile_lab.tensor import TiledTensor


class LeafContext:
    """What a leaf's forward and backward are given: its arena of temporaries, the
    precision's conversions, the weight-gradient scope, and the step's settings."""

    def __init__(self, policy: StepPolicy, layer):
        self.policy, self.layer = policy, layer
        self.casts = policy.casts
        self.training, self.grad_scale = policy.training, policy.grad_scale
        # generation's KV cache (nn.decoding) in a generation step, else None: the layers
        # that attend or give logits read it (Attention, LMHead)
        self.cache = policy.cache
        self._temps: list = []
        self._dry = backend.dry_run_active()
        if self._dry is not None:   # a dry run names its tasks by the leaf submitting them
            self._dry.leaf = layer.path

    def temp(self, t: TiledTensor) -> TiledTensor:
        """``t``, freed when this forward (or backward) ends (a view: its whole storage)."""
        self._temps.append(t)
        return t

    def keep(self, t: TiledTensor) -> TiledTensor:
        """The form of ``t`` (made here) that a record keeps: bf16 under a bf16 mode (then
        ``t`` is a temporary), else ``t``."""
        return self.casts.keep(t, self)

    def save_input(self, x: TiledTensor) -> TiledTensor:
        """The form of the input ``x`` that a record keeps: a bf16 copy under a bf16 mode
        (``x`` itself lives on: it belongs to its value), else ``x``."""
        if not self.casts.store_bf16 or x.dtype == BFLOAT16:
            return x
        return ops.to_bf16(x)

    def operand(self, t: TiledTensor, fp32: TiledTensor | None = None) -> TiledTensor:
        """``t`` as a GEMM operand (``Casts.operand``): bf16 under ``bf16``, else float32
        (``fp32``: the float32 tensor a bf16 ``t`` was kept from, if still alive)."""
        return self.casts.operand(t, self, fp32)

    def weight_grads(self):
        """Scope of the weight-gradient accumulations (dW += xᵀ·dy, db += Σ dy, the
        embeddings'): off the critical path — they feed only the optimizer — so with
        priorities on they fill the gaps of the dx chain."""
        return self.policy.scope(priority=priorities.WEIGHT_GRAD)

    def close(self) -> None:
        for t in self._temps:
            t.storage.free()
        self._temps.clear()
        if self._dry is not None:
            self._dry.leaf = ""


class Region:
    """A stretch of the forward with one trace layer: a stage (``module``) or what runs
    between stages (``module`` None)."""

    __slots__ = ("layer", "module", "records", "input_uid")

    def __init__(self, layer: int, module=None, input_uid=None):
        self.layer, self.module, self.input_uid = layer, module, input_uid
        self.records: list = []


class StepPolicy:
    """One forward (and backward) of ``model`` (a ``LanguageModel``): scopes, hints,
    gradient zeroing and the tape."""

    def __init__(self, model, *, training: bool, grad_scale: float = 1.0, cache=None):
        self.model, self.runtime, self.casts = model, model.runtime, model.casts
        self.training, self.grad_scale = training, grad_scale
        if cache is not None and training:
            raise ValueError("a generation step (cache=...) does not train: training=False")
        self.cache = cache
        self.hints = self.runtime.hints
        self.stages = model.stages
        self.n_stages = len(self.stages)
        self.params_of = getattr(model, "params_of", None) or (lambda m: m.parameters())
        self.lazy_zero = False
        self.tape = Tape(self, training=training)
        self.region: Region | None = None
        self._scopes: list = []
        self._next_stage = 0
        self._in_stage = False
        self._grads = None
        self._zero_plan: dict[int, list] = {}

    def start_gradients(self, accumulate: bool) -> None:
        """Before a step's forward: zero the gradients (now, or with ``drop_grads`` each
        one just before its first accumulation), or, ``accumulate``, add to them."""
        grads = [p.grad for p in self.params_of(self.model)]
        if accumulate and any(g.storage.dropped for g in grads):
            raise RuntimeError("accumulate=True after the optimizer dropped the gradients "
                               "(the invalidate hint): the first micro-batch of a step must "
                               "not accumulate")
        self.lazy_zero = "drop_grads" in self.hints and not accumulate
        if not accumulate and not self.lazy_zero:
            with self.scope(phase="backward", priority=priorities.ZERO_GRAD):
                for g in grads:
                    ops.fill(g, 0.0)

    def leaf_context(self, layer) -> LeafContext:
        return LeafContext(self, layer)

    # ---- forward -------------------------------------------------------------------
    @contextmanager
    def forward(self):
        """The forward: the tape is recording and the first region's scope is on."""
        previous = set_current(self.tape)
        try:
            self._enter(Region(0), "forward")
            yield self.tape
        finally:
            # normally one scope (the last region's) is open here; an interrupt between a
            # stage's pop and its next enter leaves none, one inside a stage leaves two
            self._close_scopes()
            set_current(previous)

    def run_stage(self, module, args, kw):
        """Stage ``module``'s forward (a ModuleList item, called by the model)."""
        if self._in_stage:   # a ModuleList inside a stage: part of that stage
            return module.forward(*args, **kw)
        k = self._next_stage
        self._next_stage += 1
        x = next((a for a in args if hasattr(a, "uid")), None)
        if "prefetch" in self.hints and k + 1 < self.n_stages and x is not None:
            for t in self._stage_reads(k + 1):
                t.prefetch(after=x.tensor)
        self._pop_scope()
        region = Region(k, module, None if x is None else x.uid)
        self._enter(region, "forward")
        self._in_stage = True
        try:
            out = module.forward(*args, **kw)
        finally:
            self._in_stage = False
        if "wont_use" in self.hints and self.training and k + 1 < self.n_stages:
            for record in region.records:
                for t in record.tensors():
                    t.wont_use(after=out.tensor)
        self._pop_scope()
        self._enter(Region(k + 1), "forward")
        return out

    def saved(self, record) -> None:
        """A training step's leaf saved ``record`` in the current region."""
        if record is not None:
            self.region.records.append(record)

    # ---- backward ------------------------------------------------------------------
    def backward(self) -> None:
        """The backward of the recorded forward (``Tape.backward``)."""
        try:
            self.tape.backward()
        finally:   # after an interrupt, the runtime's scope is the step's caller's again
            self._close_scopes()

    def begin_backward(self, nodes, grads) -> None:
        """Plan the lazy zero fills: each gradient in the region whose backward adds to it
        first (in the model's parameter order)."""
        self._grads = grads
        params = self.params_of(self.model)
        order = {id(p): i for i, p in enumerate(params)}
        seen: set[int] = set()
        plan: dict[int, list] = {}
        for n in reversed(nodes):
            if n.layer is None:
                continue
            for p in self.params_of(n.layer):
                if id(p) not in seen:
                    seen.add(id(p))
                    plan.setdefault(id(n.region), []).append(p)
        self._zero_plan = {k: sorted(v, key=lambda p: order[id(p)]) for k, v in plan.items()}
        self._unused = [p for p in params if id(p) not in seen]
        self.region = None

    def enter_backward(self, node, incoming) -> None:
        """Before ``node``'s backward; ``incoming``: the first gradient it reads (the
        stage's incoming gradient when the node starts a region)."""
        region = node.region
        if region is self.region:
            return
        if self.region is not None:
            self._leave_backward()
        self.region = region
        layer = region.layer
        if region.module is not None and "prefetch" in self.hints and layer > 0:
            for t in self._stage_reads(layer - 1):
                t.prefetch(after=incoming)
        zero = self._zero_plan.get(id(region), ()) if self.lazy_zero else ()
        if zero:
            with self.scope(layer=layer, phase="backward", priority=priorities.ZERO_GRAD):
                for p in zero:
                    ops.fill(p.grad, 0.0, after=incoming)
        self._enter(region, "backward")

    def _leave_backward(self) -> None:
        self._pop_scope()
        region = self.region
        if region.module is not None and "wont_use" in self.hints:
            out = self._grads.get(region.input_uid)
            for p in self.params_of(region.module):
                for t in (*p.tensors_read(), p.grad):
                    t.wont_use(after=out)

    def end_backward(self, grads) -> None:
        if self.region is not None:
            self._leave_backward()
        self.region = None
        if self.lazy_zero and self._unused:   # reached by no loss: zero for the optimizer
            with self.scope(phase="backward", priority=priorities.ZERO_GRAD):
                for p in self._unused:
                    ops.fill(p.grad, 0.0)

    # ---- scopes --------------------------------------------------------------------
    def scope(self, *, layer: int | None = None, phase: str | None = None,
              priority: int | None = None):
        """``Runtime.scope``, the priority dropped when the runtime has priorities off."""
        return self.runtime.scope(layer=layer, phase=phase,
                                  priority=priority if self.runtime.priorities else None)

    def _enter(self, region: Region, phase: str) -> None:
        self.region = region
        S = self.n_stages
        layer = min(region.layer, S)
        rank = priorities.forward if phase == "forward" else priorities.backward
        cm = self.scope(layer=region.layer, phase=phase, priority=rank(layer, S))
        cm.__enter__()
        self._scopes.append(cm)

    def _pop_scope(self) -> None:
        self._scopes.pop().__exit__(None, None, None)

    def _close_scopes(self) -> None:
        """Close every scope still open, innermost first."""
        while self._scopes:
            self._pop_scope()

    def _stage_reads(self, k: int) -> list:
        """The tensors a step reads of stage ``k``'s parameters."""
        return [t for p in self.params_of(self.stages[k]) for t in p.tensors_read()]
