"""``LanguageModel``: what every model built from layers offers — the API the optimizers, the
trainer, checkpoints, the benchmarks and the planner use.

A model subclass declares its tree (``build``), its forward (a composition returning the
loss) and, where they differ from the defaults, its inputs, its Hugging Face name mapping
and its initialisation. Everything else — a training step, validation loss, parameters
and gradients by name, the bf16 weight copies, state dicts, FLOPs — comes from here.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from nntile_lab.nn import backend, priorities
from nntile_lab.nn.backend import BFLOAT16, ops
from nntile_lab.nn.embedding import Embedding
from nntile_lab.nn.generation import generate
from nntile_lab.nn.meta import dry_run
from nntile_lab.nn.module import Module, ShapeError
from nntile_lab.nn.policy import StepPolicy
from nntile_lab.nn.precision import Casts, check_mode

# float32 bytes of one initialisation chunk: a model larger than memory is initialised in
# row bands (whole tiles) of at most this size, not a parameter at a time
INIT_CHUNK_BYTES = 32 << 20


class LanguageModel(Module):
    """A causal language model assembled from layers: ``Model(config, seed, precision)``.

    ``precision`` (``nn.precision``): ``fp32``, ``bf16`` or ``bf16-storage``. Under
    ``bf16`` each parameter a GEMM reads has a bf16 copy (``params16``), made from the
    float32 master at construction, by ``load_state_dict`` and, after each optimizer update,
    by ``param_updated`` (the optimizers call it): whoever writes ``params`` otherwise calls
    ``refresh_weight_copies``.

    Subclasses define ``build(config)`` (assign the layers), ``forward(**inputs)`` (a
    composition returning the loss value of its loss layer) and may override ``inputs``
    (the arrays a batch feeds the forward), ``to_hf``/``from_hf`` (checkpoint names) and
    ``init_weights``."""

    def __init__(self, config, seed: int = 0, precision: str = "fp32"):
        Module.__init__(self)
        self._describe(config)
        self.precision = check_mode(precision)
        self.casts = Casts(precision)
        if backend.dry_run_active() is None:   # refuse misfit layers before any tensor
            with dry_run():
                self._allocate()
                self._dry_init()
                self.check_shapes()
        self._allocate()
        self.init_weights(seed)
        if self.casts.gemm_bf16:
            for p in self.parameters():
                if p.gemm:
                    p.value16 = backend.empty(p.shape, p.tile_shape, BFLOAT16)
        self.params16 = {n: p.value16 for n, p in self.named_parameters().items()
                         if p.value16 is not None}
        self.refresh_weight_copies()

    def _allocate(self) -> None:
        """The parameters' tensors and their gradients' (StarPU's, or a dry run's)."""
        self.runtime = backend.runtime()
        named = self.named_parameters()
        for p in named.values():
            p.value = backend.empty(p.shape, p.tile_shape)
            p.value16 = None
        for p in named.values():
            p.grad = backend.empty(p.shape, p.tile_shape)
        self.params = {n: p.value for n, p in named.items()}     # Hugging Face order
        self.grads = {n: p.grad for n, p in named.items()}
        self.params16 = {}

    def check_shapes(self) -> None:
        """Refuse layers whose shapes or tiles do not fit together: the forward runs once,
        in a dry run (``nn.meta``: shape-only tensors, no task), on one sequence of the
        longest length; a mismatch is a ``ShapeError`` naming both layers."""
        T = getattr(self.config, "n_positions", 1)
        ids = np.zeros((1, T), np.int64)
        self.loss(ids, ids)

    @classmethod
    def describe(cls, config) -> LanguageModel:
        """The model's tree without tensors: sizes, FLOPs and names, no StarPU needed."""
        model = cls.__new__(cls)
        Module.__init__(model)
        model._describe(config)
        return model

    def _describe(self, config) -> None:
        self.config = config
        self.build(config)
        for path, m in self.named_modules():
            m.path = path
        for name, p in self.named_parameters().items():
            p.name = name
        self.stages = self.stage_modules()
        self._params_of = {id(m): m.parameters() for _, m in self.named_modules()}
        self._untrainable = [m.path for _, m in self.named_modules()
                             if hasattr(m, "has_backward") and not m.has_backward]

    def params_of(self, module) -> list:
        """``module.parameters()``, computed once when the model was built."""
        found = self._params_of.get(id(module))
        return module.parameters() if found is None else found

    # ---- what a subclass declares -------------------------------------------------
    def build(self, config) -> None:
        raise NotImplementedError(f"{type(self).__name__}.build(config) assigns the layers")

    def inputs(self, input_ids, labels) -> dict[str, np.ndarray]:
        """The arrays a batch feeds ``forward`` (checked: one clear error per bad value)."""
        c = self.config
        ids = token_array(input_ids, "input_ids", c.vocab_size)
        labels = token_array(labels, "labels", c.vocab_size)
        if ids.shape != labels.shape:
            raise ValueError(f"labels shape {labels.shape} differs from input_ids shape "
                             f"{ids.shape}")
        T, limit = ids.shape[1], getattr(c, "n_positions", None)
        if limit is not None and limit < T:
            raise ValueError(f"sequence length {T} exceeds n_positions={limit}: use "
                             f"sequences of at most {limit} tokens")
        return {"ids": ids, "labels": labels}

    def input_tiles(self, shape: tuple[int, int]) -> tuple[int, int]:
        """The tiles of a (batch, sequence) input: the config's batch and sequence tiles."""
        return self.config.tile("batch_tile", shape[0]), self.config.tile("seq_tile", shape[1])

    def to_hf(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Parameters by our names → by Hugging Face's (the same by default)."""
        return arrays

    def from_hf(self, state: dict) -> dict[str, np.ndarray]:
        """A Hugging Face state dict → arrays by our names, checked (names, shapes)."""
        want = {n: p.shape for n, p in self.named_parameters().items()}
        missing, unexpected = sorted(set(want) - set(state)), sorted(set(state) - set(want))
        if missing or unexpected:
            raise ValueError(f"state dict does not match this {type(self).__name__}: missing "
                             f"{missing[:5]}, unexpected {unexpected[:5]}")
        out = {}
        for n, shape in want.items():
            a = np.ascontiguousarray(state[n], dtype=np.float32)
            if a.shape != shape:
                raise ValueError(f"{n} has shape {a.shape} but this model needs {shape}: the "
                                 "checkpoint comes from a different config")
            out[n] = a
        return out

    def init_weights(self, seed: int) -> None:
        """Each parameter from its declared init, in order, from one generator seeded
        ``seed``, in row bands of whole tiles (a model larger than memory never sits whole
        in numpy)."""
        if self._dry_init():
            return
        rng = np.random.default_rng(seed)
        for p in self.parameters():
            rows = _chunk_rows(p)
            for r0 in range(0, p.shape[0], rows):
                chunk = p.init.draw((min(rows, p.shape[0] - r0),) + p.shape[1:], rng)
                p.value.copy_rows_from_numpy(chunk, r0)

    def num_params(self, *, lookups: bool = True) -> int:
        """Parameters (a tied one once); without ``lookups`` less the tables only a lookup
        reads (GPT-2's position table; an untied model's token embedding): PaLM's N, whose
        6·N are the FLOPs per token of the multiplied ones."""
        params = self.parameters()
        if not lookups:
            only_looked_up = {id(p) for m in self.named_modules() if isinstance(m[1], Embedding)
                              for p in m[1].own_params().values() if not p.gemm}
            params = [p for p in params if id(p) not in only_looked_up]
        return sum(p.size for p in params)

    def init_staging_elems(self) -> int:
        """Elements of the largest numpy chunk ``init_weights`` draws (the planner's
        staging)."""
        return max(_chunk_rows(p) * math.prod(p.shape[1:]) for p in self.parameters())

    def _dry_init(self) -> bool:
        """In a dry run (shapes only) the parameters are marked written, nothing is drawn."""
        dry = backend.dry_run_active()
        if dry is None:
            return False
        for p in self.parameters():
            dry.written(p.value)
        return True

    # ---- a step --------------------------------------------------------------------
    def forward_backward(self, input_ids, labels, *, accumulate: bool = False,
                         grad_scale: float = 1.0) -> float:
        """Mean cross-entropy of the batch; its gradient (times ``grad_scale``) is added to
        ``self.grads`` (zeroed first unless ``accumulate``).

        The runtime's memory hints (``Runtime(hints=...)``) change where tiles live, never
        a result (``nn.policy``)."""
        if self._untrainable:
            raise TypeError(f"{type(self).__name__} cannot train: {', '.join(self._untrainable)} "
                            "has no backward (a layer without one runs only in loss() and "
                            "generation)")
        arrays = self.inputs(input_ids, labels)
        backend.mark("begin")
        step = StepPolicy(self, training=True, grad_scale=grad_scale)
        step.start_gradients(accumulate)
        backend.mark("step")
        loss = self._forward(step, arrays)
        backend.mark("forward")
        step.backward()
        backend.mark("backward")
        return _read_loss(loss)

    def loss(self, input_ids, labels) -> float:
        """Mean cross-entropy, forward only (validation)."""
        arrays = self.inputs(input_ids, labels)
        return _read_loss(self._forward(StepPolicy(self, training=False), arrays))

    def _forward(self, step: StepPolicy, arrays: dict):
        """The forward inside ``step``; returns the loss tensor."""
        with step.forward() as tape:
            values = {k: tape.input(backend.from_numpy(a, self.input_tiles(a.shape)), k)
                      for k, a in arrays.items()}
            loss = self(**values)
            out = loss.tensor
            tape.hold(out)   # beyond the value: read after the backward
        return out

    # ---- generation (nn.generation, nn.decoding) -----------------------------------
    def generate(self, prompt_ids, max_new_tokens: int, **kw):
        """Continue the prompts by up to ``max_new_tokens`` tokens on a KV cache: greedy or
        sampled (``temperature``, ``top_k``, ``top_p``, ``seed``), ``stop`` tokens, left
        padded batches (``nn.generation.generate``, docs/generation.md). Returns a
        ``generate.Generation`` (``.tokens``: each row's new tokens)."""
        return generate(self, prompt_ids, max_new_tokens, **kw)

    def generation_inputs(self, ids: np.ndarray, pos: np.ndarray) -> dict[str, np.ndarray]:
        """The arrays a generation step feeds ``forward``: the step's token ids (B, t), the
        same ids as labels (a generation step's loss layer returns logits and reads no
        labels) and, for a model whose forward takes ``pos``, each token's position (B, t)
        (left pads do not count: ``generate.batching``)."""
        arrays = {"ids": ids, "labels": ids}
        if "pos" in inspect.signature(self.forward).parameters:
            arrays["pos"] = pos
        return arrays

    # ---- parameters ---------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters with Hugging Face names and layouts."""
        return self.to_hf({n: p.to_numpy() for n, p in self.params.items()})

    def grad_state_dict(self) -> dict[str, np.ndarray]:
        """Gradients, same names and layouts as ``state_dict()``."""
        return self.to_hf({n: g.to_numpy() for n, g in self.grads.items()})

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for n, array in self.from_hf(state).items():
            self.params[n].copy_from_numpy(array)
        self.refresh_weight_copies()

    def param_updated(self, name: str) -> None:
        """The optimizer has updated ``params[name]``: remake its bf16 copy (one task per
        tile, each after that tile's update)."""
        if name in self.params16:
            ops.to_bf16(self.params[name], out=self.params16[name])

    def refresh_weight_copies(self) -> None:
        """Remake every bf16 weight copy from the float32 parameters (none under fp32)."""
        for name in self.params16:
            self.param_updated(name)

    @property
    def grad_norm_priority(self) -> int:
        """The task priority an optimizer gives the gradient-norm chain
        (``nn.priorities``)."""
        return priorities.grad_norm(len(self.stages))

    def free(self) -> None:
        for t in (*self.params.values(), *self.grads.values(), *self.params16.values()):
            t.free()


def _chunk_rows(p) -> int:
    """Rows of one initialisation chunk of ``p``: whole tile bands, as many as fit in
    INIT_CHUNK_BYTES (at least one)."""
    band, row_bytes = p.tile_shape[0], 4 * math.prod(p.shape[1:])
    return min(p.shape[0], band * max(1, INIT_CHUNK_BYTES // (band * row_bytes)))


def _read_loss(loss) -> float:
    value = float(loss.to_numpy()[0])
    loss.storage.free()
    return value


def token_array(a, what: str, vocab_size: int) -> np.ndarray:
    """``a`` as a 2-D int64 array of token ids below ``vocab_size``, or one clear error."""
    a = np.asarray(a)
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{what} must be a 2-D integer array (batch, sequence), got shape "
                         f"{a.shape} and dtype {a.dtype}")
    bad = (a < 0) | (a >= vocab_size)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what}[{idx}] = {int(a[idx])} is not a token id of this model: ids "
                         f"must be in [0, {vocab_size}) (vocab_size={vocab_size})")
    return np.ascontiguousarray(a, dtype=np.int64)


__all__ = ["LanguageModel", "ShapeError", "token_array"]
