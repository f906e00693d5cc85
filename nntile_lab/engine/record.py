"""The one record: what was run, on what, with which software, and what came out.

Every study writes this form — a sweep's point, a figure's point, a benchmark's run, a
training run, a tune — so one reader, one validator and one set of plots serve them all,
and a figure can be redrawn from its records alone on a machine without StarPU (reading
needs only the json module)::

    {"schema": 2, "kind": "sweep-point" | "figure-point" | "train" | ...,
     "date": ISO time,
     "spec": ExperimentSpec.to_dict() | null,   # what ran
     "measure": "train-trace" | ... | null,     # what was measured (engine.measures)
     "options": {...},                          # the measurement's options
     "caps": {"memory_mb": n | null, "timeout_s": n | null},
     "ran": bool,                               # false: decided without running
     "status": "fits" | "oom" | "timeout" | "error",
     "reason": text | null,                     # why, unless it fits
     "results": {...},                          # the measurement's numbers
     "wall_s": n | null,                        # the point's own wall time
     "git_commit", "versions", "machine", "cpu_variant", "code_version",
     ...}                                       # whatever else the writer keeps

NaN and infinities become null (standard JSON). Writes are atomic. Records of the forms
written before this one — format 1 (``nntile_lab.record``: train runs, sweeps, benchmarks,
sweep points) and figure points (``figure_point``, record_version 1) — are converted on
read (``migrate``), so every record directory of an earlier version still loads.
"""
from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import measures
from nntile_lab.engine.facts import code_version as current_code_version
from nntile_lab.engine.facts import environment, json_safe

SCHEMA = 2
STATUSES = ("fits", "oom", "timeout", "error")
FIELDS = ("schema", "kind", "date", "spec", "measure", "options", "caps", "ran", "status",
          "reason", "results", "wall_s", "git_commit", "versions", "machine", "cpu_variant",
          "code_version")


class RecordError(ValueError):
    """A record that cannot be used: unreadable, corrupt, damaged, or of an unknown form."""


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def make_record(kind: str, spec=None, results: dict | None = None, *, status: str = "fits",
                reason: str | None = None, measure: str | None = None,
                options: dict | None = None, caps: dict | None = None, ran: bool = True,
                wall_s: float | None = None, env: dict | None = None,
                code_version: str | None = None, **extra) -> dict:
    """The record as a dict (``spec``: an ExperimentSpec, a dict, or None; ``env``: the
    environment of the process that measured, default this one's; ``extra``: kept as
    its own top-level keys; they may not reuse the names of ``FIELDS``)."""
    clash = sorted(set(extra) & set(FIELDS))
    if clash:
        raise ValueError(f"make_record: {', '.join(clash)} are the record's own fields, not "
                         "extra keys")
    spec_dict = spec.to_dict() if hasattr(spec, "to_dict") else spec
    env = env or environment()
    rec = json_safe({
        "schema": SCHEMA, "kind": kind, "date": now(), "spec": spec_dict, "measure": measure,
        "options": options or {}, "caps": {"memory_mb": None, "timeout_s": None} | (caps or {}),
        "ran": ran, "status": status, "reason": reason, "results": results or {},
        "wall_s": wall_s, "git_commit": env.get("git_commit"), "versions": env.get("versions"),
        "machine": env.get("machine"), "cpu_variant": env.get("cpu_variant"),
        "code_version": code_version or current_code_version(), **extra})
    problems = validate(rec)
    if problems:   # a writer's bug: never write what the reader would refuse
        raise ValueError(f"refusing to write a damaged {kind} record: {'; '.join(problems)}")
    return rec


def save_record(path, kind: str, spec=None, results: dict | None = None, **kw) -> Path:
    """``write_record(path, make_record(kind, spec, results, **kw))``: one run's record."""
    return write_record(path, make_record(kind, spec, results, **kw))


def write_record(path, rec: dict) -> Path:
    """Atomically write ``rec`` (``make_record``'s) to ``path`` (a JSON file)."""
    text = json.dumps(json_safe(rec), indent=1, default=str) + "\n"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(path, text.encode())


def read_record(path) -> dict:
    """The record in ``path`` (migrated to this schema); RecordError naming the file, what
    is wrong and the fix when it is unreadable, not JSON, of an unknown form or damaged."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise RecordError(f"cannot read record {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"record {path} is corrupt (not JSON: {exc}); delete it and run "
                          "again") from None
    return checked(raw, path)


def checked(raw, path="record") -> dict:
    """``raw`` (a parsed JSON document) as a valid record of this schema, or RecordError."""
    if not isinstance(raw, dict):
        raise RecordError(f"{path} is not a record (a JSON {type(raw).__name__}, not an "
                          "object); delete it and run that point again")
    rec = migrate(raw, path)
    problems = validate(rec)
    if problems:
        raise RecordError(f"{path} is a damaged record ({'; '.join(problems)}); run that "
                          "point again to replace it")
    return rec


# ---- validation ------------------------------------------------------------------------
def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate(rec: dict) -> list[str]:
    """What makes ``rec`` unusable (empty: whole). A point that fits must have its
    measurement's required numbers; numbers must be numbers — a record cut short or edited
    must be measured again, never shown as a result."""
    problems = []
    missing = [k for k in FIELDS if k not in rec]
    if missing:
        return [f"no {', '.join(missing)}"]
    if rec["schema"] != SCHEMA:
        return [f"schema {rec['schema']!r}"]
    if not isinstance(rec["kind"], str) or not rec["kind"]:
        problems.append(f"kind={rec['kind']!r}")
    for name in ("spec", "caps", "options", "results"):
        v = rec[name]
        if not (isinstance(v, dict) or (v is None and name == "spec")):
            problems.append(f"{name} is {type(v).__name__}, not an object")
    if rec["status"] not in STATUSES:
        problems.append(f"status={rec['status']!r} (one of {', '.join(STATUSES)})")
    elif rec["status"] != "fits" and not isinstance(rec["reason"], str):
        problems.append(f"status {rec['status']} without a reason")
    if rec["reason"] is not None and not isinstance(rec["reason"], str):
        problems.append(f"reason is {type(rec['reason']).__name__}, not text")
    if not isinstance(rec["ran"], bool):
        problems.append(f"ran={rec['ran']!r}")
    if not isinstance(rec.get("trace_dir"), (str, type(None))):
        problems.append("trace_dir is not a path")
    if rec["wall_s"] is not None and not _number(rec["wall_s"]):
        problems.append(f"wall_s={rec['wall_s']!r}")
    if isinstance(rec["caps"], dict):
        for k in ("memory_mb", "timeout_s"):
            v = rec["caps"].get(k)
            if v is not None and not _number(v):
                problems.append(f"caps.{k}={v!r}")
    if isinstance(rec["results"], dict) and isinstance(rec["measure"], str):
        problems += _results_problems(rec)
    return problems


def _results_problems(rec: dict) -> list[str]:
    try:
        m = measures.get(rec["measure"])
    except ValueError as exc:
        return [str(exc)]
    res, out = rec["results"], []
    for k in m.numbers:
        if res.get(k) is not None and not _number(res[k]):
            out.append(f"results.{k}={res[k]!r} is not a number")
    for k in m.tables:
        v = res.get(k)
        if v is not None and not (isinstance(v, dict) and all(_number(x) for x in v.values())):
            out.append(f"results.{k} is not an object of numbers")
    if m.name == "train-trace":   # every number of a sweep point is a number or null
        out += [f"results.{k}={v!r} is not a number" for k, v in res.items()
                if k not in m.tables and v is not None and not _number(v)]
    if rec["status"] == "fits" and rec["ran"]:
        lacking = [k for k in m.required if not _number(res.get(k))]
        if lacking:
            out.append(f"a measured point without {', '.join(lacking)}")
    return out


# ---- the forms written before this one -------------------------------------------------
# a figure point's status in the figures' words ↔ the engine's failure class
FIGURE_STATUS = {"ok": "fits", "out_of_memory": "oom", "does_not_fit": "oom",
                 "timeout": "timeout", "error": "error"}


def migrate(raw: dict, path="record") -> dict:
    """A record of any form this library ever wrote, in this schema (``raw`` itself when it
    already is). RecordError for a form it does not know."""
    if raw.get("schema") == SCHEMA:
        return raw
    if raw.get("schema") is not None:
        raise RecordError(f"record {path} has schema {raw.get('schema')!r}; this nntile_lab "
                          f"reads schema {SCHEMA} and the forms before it: it comes from a "
                          "newer version; update nntile_lab, or run again to replace it")
    if raw.get("format") == 1:
        return _from_format_1(raw, path)
    if raw.get("kind") == "figure_point" and raw.get("record_version") == 1:
        return _from_figure_point(raw, path)
    got = raw.get("format", raw.get("record_version"))
    raise RecordError(f"record {path} has format {got!r} (kind {raw.get('kind')!r}), which "
                      f"this nntile_lab does not read (schema {SCHEMA} and format 1): it comes "
                      "from an older version; run again to replace it")


def _base(raw: dict) -> dict:
    return {"schema": SCHEMA, "date": raw.get("date"), "spec": raw.get("spec"),
            "measure": None, "options": {}, "caps": {"memory_mb": None, "timeout_s": None},
            "ran": True, "status": "fits", "reason": None, "wall_s": None,
            "git_commit": raw.get("git_commit"), "versions": raw.get("versions"),
            "machine": raw.get("machine"),
            "cpu_variant": (raw.get("versions") or {}).get("kernels")
            if isinstance(raw.get("versions"), dict) else None,
            "code_version": raw.get("code_version")}


def _from_format_1(raw: dict, path) -> dict:
    """``nntile_lab.record`` format 1 (train, sweep, bench-*, sweep-point)."""
    known = {"format", "kind", "date", "spec", "git_commit", "versions", "machine", "results",
             "code_version"}
    rec = {k: v for k, v in raw.items() if k not in known} | _base(raw) | {
        "kind": raw.get("kind"), "results": raw.get("results")}
    if raw.get("kind") == "sweep-point":
        error = rec.pop("error", None)
        rec |= {"measure": "train-trace", "status": "error" if error is not None else "fits",
                "reason": error,
                "wall_s": (raw.get("results") or {}).get("point_wall_s")
                if isinstance(raw.get("results"), dict) else None}
    return rec


def _from_figure_point(raw: dict, path) -> dict:
    """``figures.records`` record_version 1: the plan and the point's result."""
    r, plan = raw.get("result"), raw.get("plan")
    if not isinstance(r, dict) or not isinstance(plan, dict):
        what = "result" if not isinstance(r, dict) else "plan"
        raise RecordError(f"{path} is a damaged record (no {what}); run that point again to "
                          "replace it")
    status = r.get("status")
    if status not in FIGURE_STATUS:
        raise RecordError(f"{path} is a damaged record (result.status={status!r}); run that "
                          "point again to replace it")
    for k in ("n_layer", "n_embd"):
        v = r.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise RecordError(f"{path} is a damaged record (result.{k}={v!r}); run that point "
                              "again to replace it")
    results = {k: v for k, v in r.items() if k not in ("status", "error")}
    return _base(raw) | {
        "kind": "figure-point", "spec": r.get("spec"), "measure": "figure",
        "options": {"system": r.get("system"), "out_of_core": bool(r.get("out_of_core"))},
        "caps": {"memory_mb": plan.get("cap_mb"), "timeout_s": plan.get("point_timeout_s")},
        "ran": status != "does_not_fit", "status": FIGURE_STATUS[status],
        "reason": r.get("error") if status != "ok" else None, "results": results,
        "plan": plan}
