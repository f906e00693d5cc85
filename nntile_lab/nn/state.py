"""GPT-2 parameters by Hugging Face GPT2LMHeadModel names and layouts, so real
checkpoints load and ours export. Inside, c_attn is kept as three (E, E)
matrices q, k, v (each tiled by whole heads); here they are joined and split.
"""
from __future__ import annotations

import math
import os

import numpy as np
from safetensors.numpy import load_file

from nntile_lab.nn.config import GPT2Config

# checkpoint entries that hold no parameter of ours: the tied head, attention mask buffers
_IGNORED_SUFFIXES = ("lm_head.weight", ".attn.bias", ".attn.masked_bias")


def hf_shapes(c: GPT2Config, split_qkv: bool = False) -> dict[str, tuple]:
    """Every parameter's name and shape, in Hugging Face order."""
    E, F = c.n_embd, c.n_inner
    shapes = {"transformer.wte.weight": (c.vocab_size, E),
              "transformer.wpe.weight": (c.n_positions, E)}
    for i in range(c.n_layer):
        h = f"transformer.h.{i}."
        shapes[h + "ln_1.weight"] = shapes[h + "ln_1.bias"] = (E,)
        if split_qkv:
            for q in "qkv":
                shapes[h + f"attn.{q}.weight"], shapes[h + f"attn.{q}.bias"] = (E, E), (E,)
        else:
            shapes[h + "attn.c_attn.weight"], shapes[h + "attn.c_attn.bias"] = (E, 3 * E), (3 * E,)
        shapes[h + "attn.c_proj.weight"], shapes[h + "attn.c_proj.bias"] = (E, E), (E,)
        shapes[h + "ln_2.weight"] = shapes[h + "ln_2.bias"] = (E,)
        shapes[h + "mlp.c_fc.weight"], shapes[h + "mlp.c_fc.bias"] = (E, F), (F,)
        shapes[h + "mlp.c_proj.weight"], shapes[h + "mlp.c_proj.bias"] = (F, E), (E,)
    shapes["transformer.ln_f.weight"] = shapes["transformer.ln_f.bias"] = (E,)
    return shapes


def init_state_dict(c: GPT2Config, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2 initialisation: weights N(0, 0.02), residual projections (c_proj)
    N(0, 0.02/√(2·n_layer)), biases 0, layer-norm weights 1."""
    return dict(iter_init_state(c, seed))


def iter_init_state(c: GPT2Config, seed: int = 0):
    """``init_state_dict``'s entries one at a time (same values), so a model larger
    than memory is initialised without holding all of it in numpy."""
    rng = np.random.default_rng(seed)
    for name, shape in hf_shapes(c).items():
        yield name, _init_values(c, name, shape, rng)


def _init_values(c: GPT2Config, name: str, shape: tuple, rng) -> np.ndarray:
    """The float32 initial values of ``name`` (or of a band of its rows, ``shape``)."""
    if ".ln_" in name or name.startswith("transformer.ln_f"):
        value = np.ones(shape) if name.endswith("weight") else np.zeros(shape)
    elif name.endswith("bias"):
        value = np.zeros(shape)
    else:
        std = 0.02 / np.sqrt(2 * c.n_layer) if name.endswith("c_proj.weight") else 0.02
        value = rng.normal(0.0, std, shape)
    return value.astype(np.float32)


# float32 bytes of one initialisation chunk: a model larger than memory is initialised
# in row bands (whole tiles) of at most this size, not a parameter at a time (a 50257 × E
# embedding in float64 is 1.2 GB at E = 3072)
INIT_CHUNK_BYTES = 32 << 20


def init_band_rows(c: GPT2Config) -> dict[str, int]:
    """Rows of one tile band (axis 0) of every Hugging Face entry, as GPT2 tiles it."""
    E = c.n_embd
    et, it = c.tile("embd_tile", E), c.tile("inner_tile", c.n_inner)
    vt, st = c.tile("vocab_tile", c.vocab_size), c.tile("seq_tile", c.n_positions)
    ht = c.tile("head_tile", c.n_head) * c.head_size
    out = {}
    for name, shape in hf_shapes(c).items():
        if name.startswith("transformer.wte"):
            band = vt
        elif name.startswith("transformer.wpe"):
            band = st
        elif len(shape) == 1:
            band = shape[0]
        elif "c_proj" in name:
            band = ht if ".attn." in name else it
        else:   # c_attn, c_fc: (E, ·)
            band = et
        out[name] = band
    return out


def init_chunk_rows(c: GPT2Config) -> dict[str, int]:
    """Rows per initialisation chunk of every entry: whole tile bands, as many as fit in
    INIT_CHUNK_BYTES (at least one band)."""
    out, shapes = {}, hf_shapes(c)
    for name, band in init_band_rows(c).items():
        shape = shapes[name]
        row_bytes = 4 * math.prod(shape[1:])
        out[name] = min(shape[0], band * max(1, INIT_CHUNK_BYTES // (band * row_bytes)))
    return out


def init_chunk_elems(c: GPT2Config) -> int:
    """Elements of the largest initialisation chunk (the planner's numpy staging)."""
    shapes, rows = hf_shapes(c), init_chunk_rows(c)
    return max(rows[n] * math.prod(shapes[n][1:]) for n in shapes)


def iter_init_chunks(c: GPT2Config, seed: int = 0):
    """``iter_init_state``'s values in row bands: ``(name, row0, float32 array)`` with
    ``init_chunk_rows`` rows each. Same values: numpy's Generator draws a band of rows
    as the matching part of the whole."""
    rng = np.random.default_rng(seed)
    rows = init_chunk_rows(c)
    for name, shape in hf_shapes(c).items():
        for r0 in range(0, shape[0], rows[name]):
            sub = (min(rows[name], shape[0] - r0),) + tuple(shape[1:])
            yield name, r0, _init_values(c, name, sub, rng)


def to_hf(params: dict[str, np.ndarray], c: GPT2Config) -> dict[str, np.ndarray]:
    """Internal (q, k, v split) → Hugging Face (c_attn joined)."""
    out = {}
    for name in hf_shapes(c):
        if ".attn.c_attn." in name:
            parts = [params[name.replace("c_attn", q)] for q in "qkv"]
            out[name] = np.concatenate(parts, axis=-1)
        else:
            out[name] = params[name]
    return out


def from_hf(state: dict, c: GPT2Config) -> dict[str, np.ndarray]:
    """Hugging Face names and layouts → internal, with checks that name what differs.

    Accepts GPT2Model keys without the ``transformer.`` prefix and ignores the tied
    ``lm_head.weight`` and attention-mask buffers."""
    state = {(k if k.startswith(("transformer.", "lm_head")) else "transformer." + k): v
             for k, v in state.items()}
    state = {k: v for k, v in state.items() if not k.endswith(_IGNORED_SUFFIXES)}
    want = hf_shapes(c)
    missing, unexpected = sorted(set(want) - set(state)), sorted(set(state) - set(want))
    if missing or unexpected:
        raise ValueError(f"state dict does not match this GPT2Config (n_layer={c.n_layer}): "
                         f"missing {missing[:5]}{'…' if len(missing) > 5 else ''}, unexpected "
                         f"{unexpected[:5]}{'…' if len(unexpected) > 5 else ''}")
    out = {}
    for name, shape in want.items():
        array = np.asarray(state[name])
        if array.shape != shape:
            raise ValueError(f"{name} has shape {array.shape} but this GPT2Config needs {shape}"
                             " — the checkpoint comes from a different config (n_embd, "
                             "n_positions, vocab_size, n_inner)")
        out |= from_hf_entry(name, array)
    return out


def from_hf_entry(name: str, array) -> dict[str, np.ndarray]:
    """One Hugging Face entry as internal ones (c_attn split into q, k, v)."""
    array = np.ascontiguousarray(array, dtype=np.float32)
    if ".attn.c_attn." in name:
        return {name.replace("c_attn", q): np.ascontiguousarray(part)
                for q, part in zip("qkv", np.split(array, 3, axis=-1))}
    return {name: array}


def load_checkpoint_file(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A GPT-2 state dict from a ``.safetensors`` file or a PyTorch state-dict file
    (``.bin``/``.pt``; needs torch), as numpy arrays. Nothing downloads."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint file {path!r} does not exist")
    if path.endswith(".safetensors"):
        try:
            return load_file(path)
        except Exception as exc:   # safetensors raises its own SafetensorError
            raise ValueError(f"checkpoint file {path!r} is not a readable .safetensors file "
                             f"(truncated or corrupt? {exc})") from None
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"reading {path!r} (a PyTorch state dict) needs torch: "
                          "pip install torch, or convert it to .safetensors") from exc
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:   # zip, pickle and EOF errors of a damaged file
        raise ValueError(f"checkpoint file {path!r} is not a readable PyTorch state dict "
                         f"(truncated or corrupt? {type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint file {path!r} holds a {type(state).__name__}, not a "
                         "state dict (name → tensor)")
    return {k: v.float().numpy() for k, v in state.items() if hasattr(v, "numpy")}
