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
        return rec, None

    def save(self, spec, results: dict, error: str | None, trace: bool) -> Path:
        return write_record(self.record_path(spec.key()), spec, results, kind="sweep-point",
                            code_version=code_version(), error=error,
                            trace_dir=str(self.trace_dir(spec.key())) if trace else None)

    def drop_trace(self, key: str) -> None:
        shutil.rmtree(self.trace_dir(key), ignore_errors=True)
