"""Weights to generate from: a training run's checkpoint, or a Hugging Face GPT-2 state-dict
file (``model.safetensors`` or ``pytorch_model.bin``).

A run's checkpoint (``nntile_lab.train.checkpoint``) holds its model config. A Hugging Face
file holds only tensors: the sizes come from their shapes, the head count from a
``config.json`` beside the file when there is one, else from GPT-2's head size of 64
(``n_embd // 64``: 12 heads for 768, 16 for 1024, 25 for 1600), unless given.

``.safetensors`` is read here with numpy (the format is an 8-byte header length, a JSON
header and the raw tensors), so it needs nothing installed; ``.bin`` is a PyTorch pickle
and needs PyTorch (read with ``weights_only=True``: no code runs from the file).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from nntile_lab.train.checkpoint import find_checkpoint, load_checkpoint

GPT2_HEAD_SIZE = 64
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
                       "BF16": ml_dtypes.bfloat16}
# tensors of Hugging Face checkpoints that are not parameters (causal-mask buffers of old
# transformers versions) or repeat one (the tied head)
_NOT_PARAMS = (".attn.bias", ".attn.masked_bias", "lm_head.weight")


def _shown(path) -> str:
    """A path for a one-line message: as typed, or quoted when it holds control characters."""
    text = str(path)
    return text if text.isprintable() else repr(text)


@dataclass
class Weights:
    """A model's sizes (``GPT2Config`` fields) and its state dict (Hugging Face names)."""

    sizes: dict
    state: dict[str, np.ndarray]
    source: str          # what was read, for messages and records
    kind: str            # "checkpoint" or "huggingface"


def read_weights(source, *, n_head: int | None = None) -> Weights:
    """The weights at ``source``: a run directory or checkpoint directory, or a Hugging Face
    ``.safetensors`` / ``.bin`` file (or a directory holding one). Every problem is one
    ``ValueError``/``FileNotFoundError`` naming the path and what is wrong."""
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"--from {_shown(source)}: no such file or directory (give a run "
                                "directory of `nntile-lab train`, its checkpoint, or a Hugging "
                                "Face GPT-2 model.safetensors / pytorch_model.bin)")
    if path.is_dir():
        hf = [path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).is_file()]
        if hf and not _is_checkpoint(path):
            path = hf[0]
        else:
            return _from_checkpoint(path)
    if path.suffix == ".safetensors":
        state = read_safetensors(path)
    elif path.suffix in (".bin", ".pt", ".pth"):
        state = _read_torch(path)
    else:
        raise ValueError(f"--from {_shown(path)}: not a run directory nor a .safetensors / .bin "
                         "state-dict file")
    state = hf_gpt2_names(state, path)
    return Weights(_sizes_from_state(state, path, n_head), state, str(path), "huggingface")


def _is_checkpoint(path: Path) -> bool:
    try:
        find_checkpoint(path)
    except FileNotFoundError:
        return False
    return True


def _from_checkpoint(path: Path) -> Weights:
    ckpt = load_checkpoint(path)
    config = ckpt.state.get("config")
    if not isinstance(config, dict):
        raise ValueError(f"--from {_shown(ckpt.path)}: the checkpoint has no model config")
    return Weights(dict(config), dict(ckpt.model_state), str(ckpt.path), "checkpoint")


def read_safetensors(path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file as numpy arrays (float types as stored)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"--from {_shown(path)}: too short for a .safetensors file")
        (n,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"--from {_shown(path)}: not a .safetensors file (bad header: "
                             f"{exc})") from None
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ValueError(f"--from {_shown(path)}: tensor {name} has dtype {info.get('dtype')}; "
                             f"readable: {', '.join(_SAFETENSORS_DTYPES)}")
        a, b = info["data_offsets"]
        if b > len(data):
            raise ValueError(f"--from {_shown(path)}: tensor {name} runs past the end of the file "
                             "(truncated download?)")
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(info["shape"])
    return out


def _read_torch(path: Path) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise ValueError(f"--from {_shown(path)}: a .bin state dict is a PyTorch file and needs "
                         "PyTorch (pip install 'nntile_lab[bench]'), or convert it to "
                         ".safetensors") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 — any unpickling failure is a bad file
        raise ValueError(f"--from {_shown(path)}: not a PyTorch state dict ({type(exc).__name__}: "
                         f"{exc})") from None
    if not isinstance(state, dict):
        raise ValueError(f"--from {_shown(path)}: holds a {type(state).__name__}, not a state dict")
    return {k: v.float().numpy() for k, v in state.items() if hasattr(v, "numpy")}


def hf_gpt2_names(state: dict, where) -> dict[str, np.ndarray]:
    """A Hugging Face GPT-2 state dict with ``GPT2LMHeadModel``'s names (``transformer.``
    prefixed: ``GPT2Model`` files have none), float32, non-parameters dropped."""
    out = {}
    for name, a in state.items():
        if name.endswith(_NOT_PARAMS):
            continue
        key = name if name.startswith("transformer.") else f"transformer.{name}"
        out[key] = np.asarray(a, np.float32)
    if "transformer.wte.weight" not in out:
        raise ValueError(f"--from {where}: no transformer.wte.weight: not a GPT-2 state dict "
                         f"(found {sorted(state)[:4]}…)")
    return out


def _sizes_from_state(state: dict, where: Path, n_head: int | None) -> dict:
    V, E = state["transformer.wte.weight"].shape
    layers = {int(k.split(".")[2]) for k in state if k.startswith("transformer.h.")}
    if not layers or layers != set(range(max(layers) + 1)):
        raise ValueError(f"--from {where}: the blocks transformer.h.N are {sorted(layers)}, "
                         "not 0…L-1")
    sizes = {"vocab_size": int(V), "n_embd": int(E), "n_layer": len(layers),
             "n_positions": int(state["transformer.wpe.weight"].shape[0]),
             "n_inner": int(state["transformer.h.0.mlp.c_fc.weight"].shape[1])}
    cfg_file = where.parent / "config.json"
    cfg = json.loads(cfg_file.read_text()) if cfg_file.is_file() else {}
    if n_head is None:
        n_head = cfg.get("n_head")
    if n_head is None:
        if E % GPT2_HEAD_SIZE:
            raise ValueError(f"--from {where}: n_embd={E} is not a multiple of GPT-2's head "
                             "size 64 and no config.json gives n_head: pass --n-head")
        n_head = E // GPT2_HEAD_SIZE
    sizes["n_head"] = int(n_head)
    if "layer_norm_epsilon" in cfg:
        sizes["layer_norm_epsilon"] = float(cfg["layer_norm_epsilon"])
    return sizes
