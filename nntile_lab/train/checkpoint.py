"""Training checkpoints that survive a crash at any moment.

A checkpoint is a directory ``OUT/checkpoint/`` holding ``model.npz`` (parameters by name),
``optimizer.npz`` (the optimizer's arrays) and ``state.json`` (step, sampler RNG state,
model config, run log, and the optimizer state's non-array part with placeholders for its
arrays).  npz + JSON needs nothing beyond numpy and stays readable by any tool.

Why the directory dance: a checkpoint is only useful if it is whole.  A new one is written
to a temporary directory next to the old one and fsynced; then the old directory is
renamed to ``checkpoint.old``, the new one to ``checkpoint``, and ``checkpoint.old`` is
removed.  A crash can only leave the latest good checkpoint in ``checkpoint`` or (between
the two renames) in ``checkpoint.old``, and ``find_checkpoint`` looks in that order.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nntile_lab.data.bins import atomic_write_bytes

CHECKPOINT_DIR = "checkpoint"
FORMAT_VERSION = 1
_STATE = "state.json"
_ARRAY = "__ndarray__"


@dataclass
class Checkpoint:
    """A loaded checkpoint: where it was, the arrays, and the rest of the run state."""

    path: Path
    model_state: dict[str, np.ndarray]
    optimizer_state: dict
    state: dict


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) so readers see the old file or the whole new one."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def config_dict(cfg) -> dict:
    """A model config (dataclass or plain object) as the JSON-safe dict a checkpoint stores."""
    raw = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    return json.loads(json.dumps(raw))


def check_config(saved: dict, current: dict, where: str | os.PathLike) -> None:
    """Raise ValueError naming every field where two model configs differ.

    Tile sizes (fields ending in ``_tile``) are left out: they change how the work is
    split, not the model, so a run may resume with a different tiling.
    """
    current = json.loads(json.dumps(current))
    diffs = [f"{k}: checkpoint {saved.get(k, '<absent>')!r} vs model {current.get(k, '<absent>')!r}"
             for k in sorted(saved.keys() | current.keys())
             if not k.endswith("_tile") and saved.get(k) != current.get(k)]
    if diffs:
        raise ValueError(f"checkpoint {where} was saved from a different model config; "
                         f"differing fields: {'; '.join(diffs)}")


def _encode(obj, arrays: dict, path: str):
    """A JSON-safe copy of ``obj`` whose arrays are moved to ``arrays`` behind placeholders."""
    if isinstance(obj, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {_ARRAY: key}
    if isinstance(obj, dict):
        bad = [k for k in obj if not isinstance(k, str)]
        if bad:
            raise TypeError(f"optimizer state {path or '<root>'}: dict keys must be strings to "
                            f"be saved, got {bad[:3]!r}")
        return {k: _encode(v, arrays, f"{path}.{k}" if path else k) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"optimizer state {path or '<root>'}: cannot save a {type(obj).__name__}; "
                    f"use numpy arrays, python scalars, lists and str-keyed dicts")


def _decode(obj, arrays):
    if isinstance(obj, dict):
        if obj.keys() == {_ARRAY}:
            return arrays[obj[_ARRAY]]
        return {k: _decode(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, arrays) for v in obj]
    return obj


def _write_npz(path: Path, arrays: dict) -> None:
    with open(path, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
        f.flush()
        os.fsync(f.fileno())


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(out_dir: str | os.PathLike, model_state: dict, optimizer_state: dict,
                    state: dict) -> Path:
    """Write ``OUT/checkpoint/`` atomically (see the module docstring); return its path.

    ``state`` must be JSON-serialisable (step, RNG state, config, log, ...).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final, old = out_dir / CHECKPOINT_DIR, out_dir / f"{CHECKPOINT_DIR}.old"
    tmp = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{CHECKPOINT_DIR}.", suffix=".tmp"))
    try:
        _write_npz(tmp / "model.npz", model_state)
        opt_arrays: dict = {}
        skeleton = _encode(optimizer_state, opt_arrays, "")
        _write_npz(tmp / "optimizer.npz", opt_arrays)
        atomic_write_text(tmp / _STATE, json.dumps(
            {"format": FORMAT_VERSION, **state, "optimizer": skeleton}, allow_nan=False))
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(old, ignore_errors=True)  # a leftover from an interrupted save
            os.replace(final, old)
        os.replace(tmp, final)
        _fsync_dir(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.exists() and old.exists():
            os.replace(old, final)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return final


def find_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint directory for ``path``: a checkpoint itself, or a run directory
    holding ``checkpoint/`` (or ``checkpoint.old/`` if a save was cut between renames)."""
    path = Path(path)
    for cand in (path, path / CHECKPOINT_DIR, path / f"{CHECKPOINT_DIR}.old"):
        if (cand / _STATE).is_file():
            return cand
    raise FileNotFoundError(f"no checkpoint at {path}: expected {path / _STATE} or "
                            f"{path / CHECKPOINT_DIR / _STATE} (a run directory written by "
                            f"`train` with checkpoints on)")


def read_state(path: str | os.PathLike) -> dict:
    """The non-array part of the checkpoint at ``path`` (cheap: no arrays are read)."""
    with open(find_checkpoint(path) / _STATE, encoding="utf-8") as f:
        return json.load(f)


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read the checkpoint that ``find_checkpoint(path)`` locates."""
    where = find_checkpoint(path)
    state = read_state(where)
    if state.get("format") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {where} has format {state.get('format')!r}; this "
                         f"version of nntile_lab reads format {FORMAT_VERSION}")
    skeleton = state.pop("optimizer")
    return Checkpoint(path=where, model_state=_read_npz(where / "model.npz"),
                      optimizer_state=_decode(skeleton, _read_npz(where / "optimizer.npz")),
                      state=state)
