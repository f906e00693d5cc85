"""The store: records in one folder, one JSON file each, written atomically.

``Store(dir)`` holds a study's records: a sweep's cache (``DIR/<point key>.json``, a trace
beside it in ``DIR/<key>.trace/``), a figure run's ``records/``, a tune's points. Every read
is validated (``engine.record.read_record``: the old forms are converted); a file that is
not a whole record is never used as one — ``load`` says why and the point runs again, and
``records`` lists it among the problems. Nothing is deleted: ``set_aside`` moves a record
into ``DIR.set_aside/<time>/``.
"""
from __future__ import annotations

import datetime
import os
import shutil
import sys
from pathlib import Path

from nntile_lab.engine.facts import code_version as current_code_version
from nntile_lab.engine.record import RecordError, read_record, write_record


def default_dir(study: str = "sweep") -> Path:
    """``$NNTILE_LAB_CACHE/<study>`` (default ``~/.cache/nntile_lab/<study>``)."""
    root = os.environ.get("NNTILE_LAB_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "nntile_lab"))
    return Path(root) / study


class Store:
    """Records under one directory (created on the first write)."""

    def __init__(self, directory=None, study: str = "sweep"):
        self.dir = Path(directory) if directory is not None else default_dir(study)

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def trace_dir(self, name: str) -> Path:
        return self.dir / f"{name}.trace"

    def save(self, name: str, rec: dict) -> Path:
        """Write ``rec`` as ``DIR/<name>.json`` (atomically: an interrupted study leaves
        only whole records)."""
        return write_record(self.path(name), rec)

    def load(self, name: str, *, kind: str | None = None,
             code_version: str | None = "current") -> tuple[dict | None, str | None]:
        """``(record, None)`` when ``DIR/<name>.json`` is a usable record (of ``kind``,
        measured by ``code_version``: by default this code's; None accepts any), else
        ``(None, why)`` — why is None when there simply is none yet."""
        path = self.path(name)
        if not path.exists():
            return None, None
        try:
            rec = read_record(path)
        except RecordError as exc:
            return None, f"{exc}; the point runs again"
        if kind is not None and rec["kind"] != kind:
            return None, (f"{path} is a {rec['kind']} record, not a {kind} one; the point "
                          "runs again")
        want = current_code_version() if code_version == "current" else code_version
        if want is not None and rec["code_version"] != want:
            return None, (f"cached point {path.name} was measured by code version "
                          f"{rec['code_version']}, this is {want}: it runs again")
        return rec, None

    def records(self, kind: str | None = None) -> tuple[list[tuple[Path, dict]], list[str]]:
        """``([(path, record)], problems)``: every whole record (of ``kind``) in the folder,
        by file name, and one line per file that is not one."""
        out, problems = [], []
        for path in sorted(self.dir.glob("*.json")):
            try:
                rec = read_record(path)
            except RecordError as exc:
                problems.append(str(exc))
                continue
            if kind is None or rec["kind"] == kind:
                out.append((path, rec))
        return out, problems

    def drop_trace(self, name: str) -> None:
        shutil.rmtree(self.trace_dir(name), ignore_errors=True)

    def set_aside(self, path, why: str, say=None) -> Path:
        """Move ``path`` out of the folder into ``DIR.set_aside/<time>/`` (never delete a
        measurement), saying so (``say``: a callable given the line; default stderr)."""
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        dest_dir = self.dir.parent / f"{self.dir.name}.set_aside" / stamp
        dest_dir.mkdir(parents=True, exist_ok=True)
        path = Path(path)
        dest = dest_dir / path.name
        n = 1
        while dest.exists():   # the same record set aside twice within one second
            n += 1
            dest = dest_dir / f"{path.stem}.{n}{path.suffix}"
        path.replace(dest)
        line = f"moved {path} to {dest} ({why})"
        (say or (lambda m: print(m, file=sys.stderr)))(line)
        return dest
