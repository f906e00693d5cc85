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

Verification: ``manifest.json``, written last, holds each file's size and SHA-256 (and its
own checksum); every load checks them, so a truncated, emptied, deleted or altered file is a
``CheckpointError`` naming the file (and the last good checkpoint, if any), never a raw
numpy/JSON error.
Temporary directories of a killed write are removed by the next save (or ``clean_stale``).
Ctrl-C during a save is held back until the save is done.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.interrupts import deferred_interrupts

CHECKPOINT_DIR = "checkpoint"
FORMAT_VERSION = 2           # 2: with manifest.json (1: without, read unverified)
_STATE = "state.json"
_MANIFEST = "manifest.json"
_FILES = ("model.npz", "optimizer.npz", _STATE)
_TMP_PREFIX = f".{CHECKPOINT_DIR}."
_ARRAY = "__ndarray__"


class CheckpointError(ValueError):
    """A checkpoint cannot be written, or read back whole and unaltered."""


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


def _digest(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def _files_digest(files) -> str:
    """SHA-256 of a manifest's file list, as written (sorted keys)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def _last_good(run_dir: Path, bad: Path) -> str:
    """A sentence naming the newest intact checkpoint of ``run_dir`` other than ``bad``."""
    for cand in (run_dir / CHECKPOINT_DIR, run_dir / f"{CHECKPOINT_DIR}.old"):
        if cand != bad and (cand / _STATE).is_file():
            try:
                step = _verified_state(cand).get("step")
            except CheckpointError:
                continue
            return f"the last good checkpoint is {cand} (step {step})"
    return (f"no intact checkpoint is left in {run_dir}: train again without --resume, or "
            "restore the file from a backup")


def _damaged(where: Path, name: str, why: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {where} is damaged: {where / name} {why}; "
                           f"{_last_good(where.parent, where)}")


def verify(where: str | os.PathLike, names=_FILES) -> dict:
    """Check the files ``names`` of checkpoint directory ``where`` against its manifest
    (size, then SHA-256); return the manifest. Raises CheckpointError naming the file."""
    where = Path(where)
    try:
        manifest = json.loads((where / _MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
    except FileNotFoundError:
        raise _damaged(where, _MANIFEST, "is missing (the save was cut short, or the file "
                       "was deleted)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _damaged(where, _MANIFEST, f"is unreadable ({exc})") from None
    # the manifest's own checksum (manifests written before it have none): an altered
    # manifest is named as such, not as the file whose SHA-256 in it was changed
    if "sha256" in manifest and manifest["sha256"] != _files_digest(files):
        raise _damaged(where, _MANIFEST, "does not match its own checksum (altered after it "
                       "was saved)")
    for name in names:
        want = files.get(name) if isinstance(files, dict) else None
        if not isinstance(want, dict):
            raise _damaged(where, _MANIFEST, f"does not list {name}")
        path = where / name
        if not path.is_file():
            raise _damaged(where, name, "is missing")
        size = path.stat().st_size
        if size != want.get("bytes"):
            raise _damaged(where, name, f"has {size} bytes, the manifest says "
                           f"{want.get('bytes')} (truncated, emptied or overwritten)")
        if _digest(path)["sha256"] != want.get("sha256"):
            raise _damaged(where, name, "does not match its SHA-256 in the manifest "
                           "(altered after it was saved)")
    return manifest


def _verified_state(where: Path) -> dict:
    """state.json of checkpoint ``where``, verified when its format has a manifest."""
    try:
        text = (where / _STATE).read_text(encoding="utf-8")
        state = json.loads(text)
    except (OSError, ValueError) as exc:
        if (where / _MANIFEST).is_file():
            verify(where, (_STATE,))   # names the damage when the manifest can
        raise _damaged(where, _STATE, f"is unreadable ({exc})") from None
    if not isinstance(state, dict):
        raise _damaged(where, _STATE, "does not hold a JSON object")
    if state.get("format") == 1 and not (where / _MANIFEST).exists():
        return state                   # written before manifests existed
    verify(where, (_STATE,))
    return state


def clean_stale(out_dir: str | os.PathLike) -> list[Path]:
    """Remove what a killed checkpoint write left in ``out_dir``: its temporary
    directories, temporary files of atomic writes, and ``checkpoint.old`` once
    ``checkpoint`` verifies whole (killed after the second rename, before the removal).
    Return what was removed."""
    out_dir = Path(out_dir)
    removed = []
    if not out_dir.is_dir():
        return removed
    old = out_dir / f"{CHECKPOINT_DIR}.old"
    if old.is_dir() and _intact(out_dir / CHECKPOINT_DIR):
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    for p in out_dir.iterdir():
        if p.name.startswith(".") and p.name.endswith(".tmp"):
            if p.is_dir() and p.name.startswith(_TMP_PREFIX):
                shutil.rmtree(p, ignore_errors=True)
            elif p.is_file():
                p.unlink(missing_ok=True)
            else:
                continue
            removed.append(p)
    return removed


def _intact(where: Path) -> bool:
    """Whether checkpoint directory ``where`` has a manifest and every file matches it."""
    if not (where / _MANIFEST).is_file():
        return False
    try:
        verify(where)
    except CheckpointError:
        return False
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(out_dir: str | os.PathLike, model_state: dict, optimizer_state: dict,
                    state: dict) -> Path:
    """Write ``OUT/checkpoint/`` atomically (see the module docstring); return its path.

    ``state`` must be JSON-serialisable (step, RNG state, config, log, ...). A Ctrl-C
    during the save takes effect once it is done. A failed write (disk full, ...) raises
    CheckpointError naming the file; the previous checkpoint is left as it was.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise CheckpointError(f"cannot write a checkpoint in {out_dir}: it is a file, not a "
                              "directory; give another output directory")
    with deferred_interrupts():
        out_dir.mkdir(parents=True, exist_ok=True)
        clean_stale(out_dir)
        final, old = out_dir / CHECKPOINT_DIR, out_dir / f"{CHECKPOINT_DIR}.old"
        tmp = Path(tempfile.mkdtemp(dir=out_dir, prefix=_TMP_PREFIX, suffix=".tmp"))
        writing = tmp
        try:
            writing = tmp / "model.npz"
            _write_npz(writing, model_state)
            opt_arrays: dict = {}
            skeleton = _encode(optimizer_state, opt_arrays, "")
            writing = tmp / "optimizer.npz"
            _write_npz(writing, opt_arrays)
            writing = tmp / _STATE
            atomic_write_text(writing, json.dumps(
                {"format": FORMAT_VERSION, **state, "optimizer": skeleton}, allow_nan=False))
            writing = tmp / _MANIFEST     # last: its presence means the rest is whole
            files = {n: _digest(tmp / n) for n in _FILES}
            atomic_write_text(writing, json.dumps(
                {"format": FORMAT_VERSION, "files": files, "sha256": _files_digest(files)}))
            writing = final
            _fsync_dir(tmp)
            if final.exists():
                shutil.rmtree(old, ignore_errors=True)  # a leftover from an interrupted save
                os.replace(final, old)
            os.replace(tmp, final)
            _fsync_dir(out_dir)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.exists() and old.exists():
                os.replace(old, final)
            if isinstance(exc, OSError):
                kept = (f"the previous checkpoint {final} is intact" if final.exists()
                        else "no previous checkpoint existed")
                raise CheckpointError(f"could not write checkpoint file {writing}: "
                                      f"{exc.strerror or exc}; {kept}") from exc
            raise
        shutil.rmtree(old, ignore_errors=True)
    return final


def find_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint directory for ``path``: a checkpoint itself, or a run directory
    holding ``checkpoint/`` (or ``checkpoint.old/`` if a save was cut between renames)."""
    path = Path(path)
    for cand in (path, path / CHECKPOINT_DIR, path / f"{CHECKPOINT_DIR}.old"):
        # any of its files marks a checkpoint: one with a file deleted is reported
        # as damaged, not skipped for an older one
        if any((cand / name).is_file() for name in (*_FILES, _MANIFEST)):
            return cand
    raise FileNotFoundError(f"no checkpoint at {path}: expected {path / _STATE} or "
                            f"{path / CHECKPOINT_DIR / _STATE} (a run directory written by "
                            f"`train` with checkpoints on)")


def read_state(path: str | os.PathLike) -> dict:
    """The non-array part of the checkpoint at ``path`` (cheap: no arrays are read;
    state.json is verified against the manifest)."""
    return _verified_state(find_checkpoint(path))


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Read the checkpoint that ``find_checkpoint(path)`` locates, every file verified."""
    where = find_checkpoint(path)
    state = _verified_state(where)
    fmt = state.get("format")
    if fmt not in (1, FORMAT_VERSION):
        raise ValueError(f"checkpoint {where} has format {fmt!r}; this version of "
                         f"nntile_lab reads formats 1 and {FORMAT_VERSION}")
    if fmt == 1:
        warnings.warn(f"checkpoint {where} has format 1 (no manifest): its files cannot be "
                      "verified", stacklevel=2)
    else:
        verify(where)
    arrays = {}
    for name in ("model.npz", "optimizer.npz"):
        try:
            arrays[name] = _read_npz(where / name)
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            raise _damaged(where, name, f"cannot be read ({type(exc).__name__}: {exc})") \
                from None
    skeleton = state.pop("optimizer")
    try:
        optimizer_state = _decode(skeleton, arrays["optimizer.npz"])
    except KeyError as exc:
        raise _damaged(where, "optimizer.npz", f"lacks the array {exc}") from None
    return Checkpoint(path=where, model_state=arrays["model.npz"],
                      optimizer_state=optimizer_state, state=state)
