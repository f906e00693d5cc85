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
from nntile_lab.engine.facts import code_version, environment, json_safe, machine, versions
from nntile_lab.engine.point import Caps, Point
from nntile_lab.engine.record import (
    SCHEMA,
    STATUSES,
    RecordError,
    make_record,
    read_record,
    save_record,
    write_record,
)
from nntile_lab.engine.runner import measure_or_reuse, refused, run_point, run_points
from nntile_lab.engine.store import Store, default_dir

__all__ = ["SCHEMA", "STATUSES", "Caps", "Point", "RecordError", "Store", "code_version",
           "default_dir", "environment", "json_safe", "machine", "make_record",
           "measure_or_reuse", "read_record", "refused", "run_point", "run_points",
           "save_record", "versions", "write_record"]
