"""The experiment engine: one way to run a measured point, one record, one store.

    from nntile_lab.engine import Caps, Point, Store, run_point, run_points
    p = Point("train-trace", spec, caps=Caps(memory_mb=2048, timeout_s=600), kind="sweep-point")
    rec = run_point(p)           # in a fresh process: a record, status fits/oom/timeout/error

- ``point``: ``Point`` (spec + what to measure + caps) and ``Caps``; ``Point.key()`` names
  it on this machine.
- ``runner``: ``run_point`` (own process, memory cap, time limit, stop), ``run_points`` (a
  list, a store, a progress bar, resumable), ``refused`` (a point decided without running).
- ``record``: the one record form (schema 2), validated on read; earlier forms converted.
- ``store``: ``Store(dir)``: records in a folder, atomic writes, nothing deleted.
- ``measures``: the measurements a point can name (each lives with its study).
- ``facts``: versions, machine, CPU variant and code version every record carries.
- ``worker``, ``memcap``: the point's process and its memory cap.

Every study — ``sweep``, ``bench``, ``figures``, ``tune`` — and the widgets run points
through this package; the plots of records are in ``nntile_lab.plots``.
"""
from __future__ import annotations

import importlib

# loaded on first use (PEP 562): a point's process imports ``engine.worker`` and only what it
# needs — its peak RSS is what some measurements report
_NAMES = {
    **dict.fromkeys(("code_version", "environment", "json_safe", "machine", "versions"),
                    "facts"),
    **dict.fromkeys(("Caps", "Point"), "point"),
    **dict.fromkeys(("SCHEMA", "STATUSES", "RecordError", "make_record", "read_record",
                     "save_record", "write_record"), "record"),
    **dict.fromkeys(("measure_or_reuse", "refused", "run_point", "run_points"), "runner"),
    **dict.fromkeys(("Store", "default_dir"), "store"),
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'nntile_lab.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"nntile_lab.engine.{_NAMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
