"""The sweep's on-disk cache: one record per point, keyed by spec and code version.

``DIR/<spec.key()>.json`` is the point's record (``nntile_lab.record``: spec, git commit,
versions, machine, results, plus ``code_version`` and ``error``); ``DIR/<key>.trace/``
its trace tables when kept. A record is reused only when its code version (a hash of the
package's sources and the compiled kernels) equals this process's; otherwise, or when the
file is corrupt or of another record format, the point runs again and a message says why.
Writes are atomic, so an interrupted sweep leaves only whole records.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
from pathlib import Path

from nntile_lab.record import RecordError, read_record, write_record

PACKAGE = Path(__file__).resolve().parent.parent
# Views only: editing them cannot change a measured number.
VIEW_DIRS = ("widgets",)


def default_dir() -> Path:
    root = os.environ.get("NNTILE_LAB_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "nntile_lab"))
    return Path(root) / "sweep"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """16 hex digits of sha256 over the package's Python sources, the compiled extension
    and, in a source checkout, ``kernels/`` (C sources and the codelet table)."""
    h = hashlib.sha256()
    files = [p for p in PACKAGE.rglob("*.py")
             if p.relative_to(PACKAGE).parts[0] not in VIEW_DIRS]
    files += list(PACKAGE.glob("_ext/*.so"))   # every CPU variant
    kernels = PACKAGE.parent / "kernels"
    if kernels.is_dir():
        files += [p for p in kernels.rglob("*") if p.suffix in (".c", ".h", ".py")]
    try:
        from nntile_lab._lib import EXT_FILE  # the extension actually loaded
        files.append(Path(EXT_FILE))
        h.update(b"loaded:" + Path(EXT_FILE).name.encode())   # NNTILE_LAB_CPU_VARIANT
    except ImportError:
        pass
    for p in sorted(set(files)):
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def damage(rec: dict) -> str | None:
    """What makes a current-version record unusable (None: whole): results must be an
    object of numbers (``memory_by_category`` an object of numbers), ``error`` text or
    null, and a point without an error must have its GFLOP/s — a record cut short or
    edited must be measured again, never shown as a result."""
    results, error = rec.get("results"), rec.get("error")
    if not isinstance(results, dict):
        return f"results is {type(results).__name__}, not an object"
    if error is not None and not isinstance(error, str):
        return f"error is {type(error).__name__}, not text"
    if not isinstance(rec.get("trace_dir"), (str, type(None))):
        return "trace_dir is not a path"
    for name, v in results.items():
        if name == "memory_by_category":
            if not (isinstance(v, dict) and all(_number(x) for x in v.values())):
                return "memory_by_category is not an object of numbers"
        elif v is not None and not _number(v):
            return f"results.{name}={v!r} is not a number"
    if error is None:
        missing = [m for m in ("gflops", "step_time_s", "tokens_per_s")
                   if not _number(results.get(m))]
        if missing:
            return f"a measured point without {', '.join(missing)}"
    return None


class Cache:
    """Point records under one directory."""

    def __init__(self, directory=None):
        self.dir = Path(directory) if directory is not None else default_dir()

    def record_path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def trace_dir(self, key: str) -> Path:
        return self.dir / f"{key}.trace"

    def load(self, key: str) -> tuple[dict | None, str | None]:
        """``(record, None)`` when a usable record exists, else ``(None, why)`` — why is
        None when there simply is none yet."""
        path = self.record_path(key)
        if not path.exists():
            return None, None
        try:
            rec = read_record(path)
        except RecordError as exc:
            return None, f"{exc}; the point runs again"
        if rec.get("kind") != "sweep-point" or "results" not in rec:
            return None, f"cache file {path} is not a sweep point record; the point runs again"
        if rec.get("code_version") != code_version():
            return None, (f"cached point {path.name} was measured by code version "
                          f"{rec.get('code_version')}, this is {code_version()}: it runs "
                          "again")
        problem = damage(rec)
        if problem:
            return None, f"cache file {path} is damaged ({problem}); the point runs again"
        return rec, None

    def save(self, spec, results: dict, error: str | None, trace: bool) -> Path:
        return write_record(self.record_path(spec.key()), spec, results, kind="sweep-point",
                            code_version=code_version(), error=error,
                            trace_dir=str(self.trace_dir(spec.key())) if trace else None)

    def drop_trace(self, key: str) -> None:
        shutil.rmtree(self.trace_dir(key), ignore_errors=True)
