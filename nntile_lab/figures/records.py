"""A figure's records: one engine record per point (``nntile_lab.engine``: kind
``figure-point``, measurement ``figure``; the plan kept beside the result), in the store
``OUT/records`` under readable names (``nntile_lab_L4_E256.json``), and the table every
figure is drawn from. Reading them needs neither StarPU nor torch; records written before
the engine (``figure_point``, record_version 1) are read too (``engine.record.migrate``).

A point's status in the figures' words: ``ok`` (the engine's "fits"), ``does_not_fit``
("oom" decided before running: fp32 Adam alone is over the cap), ``out_of_memory`` ("oom"
while running), ``timeout``, ``error``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from nntile_lab.engine import RecordError, Store, environment, make_record, read_record
from nntile_lab.engine.record import FIGURE_STATUS, checked
from nntile_lab.figures.family import (
    ADAM_BYTES_PER_PARAM,
    PRECISION,
    FigurePlan,
    family_params,
    is_nntile,
    plan_params,
)
from nntile_lab.plots.paper import CATEGORIES, OOC_CATEGORY

RECORD_KIND = "figure-point"
# a point that did not fit is a 0 (as the paper's missing bars); any other status but "ok"
# is a failure (a configuration error, a crash, a timeout): shown as failed, with its reason
MEMORY_STATUSES = ("does_not_fit", "out_of_memory")
SET_ASIDE = "records.set_aside"
# the result's keys that are the record's own fields
OWN = ("status", "error", "record_env")


def store(out_dir) -> Store:
    return Store(Path(out_dir) / "records")


def record_name(system: str, n_layer: int, n_embd: int) -> str:
    return f"{system}_L{n_layer}_E{n_embd}"


def record_path(out_dir: Path, system: str, n_layer: int, n_embd: int) -> Path:
    return store(out_dir).path(record_name(system, n_layer, n_embd))


def figure_status(rec: dict) -> str:
    """The point's status in the figures' words (module docstring)."""
    if rec["status"] == "oom":
        return "out_of_memory" if rec["ran"] else "does_not_fit"
    return {"fits": "ok"}.get(rec["status"], rec["status"])


def figure_result(rec: dict) -> dict:
    """The point's result as ``figures.run.run_point`` returns it: the measurement's
    numbers, ``status`` in the figures' words and ``error``."""
    return dict(rec["results"]) | {"status": figure_status(rec), "error": rec["reason"]}


def point_record(plan: FigurePlan, result: dict) -> dict:
    """The engine record of a point's ``result`` (``run_point``'s), with the plan."""
    status = result["status"]
    if status not in FIGURE_STATUS:
        raise ValueError(f"a figure point's status is one of {', '.join(FIGURE_STATUS)}, "
                         f"not {status!r}")
    env = result.get("record_env")   # the measuring process's versions (its BLAS, kernels)
    results = {k: v for k, v in result.items() if k not in OWN}
    return make_record(
        RECORD_KIND, result.get("spec"), results, status=FIGURE_STATUS[status],
        reason=None if status == "ok" else (result.get("error") or status),
        ran=status != "does_not_fit", measure="figure",
        options={"system": result["system"], "out_of_core": bool(result.get("out_of_core"))},
        caps={"memory_mb": plan.cap_mb, "timeout_s": plan.point_timeout_s},
        env=None if env is None else environment() | env, plan=plan.to_dict())


def write_point_record(out_dir: Path, plan: FigurePlan, result: dict) -> Path:
    """Atomically write the point's record (the figure can be redrawn from these alone)."""
    name = record_name(result["system"], result["n_layer"], result["n_embd"])
    return store(out_dir).save(name, point_record(plan, result))


def failed(status: str) -> bool:
    """A point that neither ran nor failed for memory."""
    return status != "ok" and status not in MEMORY_STATUSES


def set_aside(out_dir: Path, path: Path, why: str) -> Path:
    """Move a record out of ``out_dir/records`` (never delete a measurement) into
    ``out_dir/records.set_aside/<time>/``, saying so on stderr."""
    return store(out_dir).set_aside(path, why, say=lambda line: print(
        f"nntile-lab figures: {line}", file=sys.stderr))


def check_record(rec, path) -> dict:
    """``rec`` (parsed JSON, of any form) as a whole figure record of this schema, else
    ValueError (``engine.RecordError``) naming ``path`` and what is wrong (a record cut
    short or edited by hand must not crash the drawing or be drawn)."""
    rec = checked(rec, path)
    if rec["kind"] != RECORD_KIND or not isinstance(rec.get("plan"), dict):
        raise RecordError(f"{path} is not a figure record (kind {rec['kind']!r}); rerun that "
                          "point")
    r = rec["results"]
    problems = [f"results.{k}={r.get(k)!r}" for k in ("n_layer", "n_embd")
                if not isinstance(r.get(k), int) or isinstance(r.get(k), bool) or r[k] < 1]
    if not isinstance(r.get("system"), str):
        problems.append(f"results.system={r.get('system')!r}")
    p = r.get("params")   # another model's size is recorded (GPT-2's is the paper's formula)
    if record_model(rec) != "gpt2" and (not isinstance(p, int) or isinstance(p, bool)
                                        or p < 1):
        problems.append(f"results.params={p!r}")
    for k in ("cap_mb", "vocab_size"):
        v = rec["plan"].get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            problems.append(f"plan.{k}={v!r}")
    if problems:
        raise RecordError(f"{path} is a damaged figure record ({', '.join(problems)}); rerun "
                          "that point (`nntile-lab figures` measures it again)")
    return rec


def read_records(out_dir: Path) -> list[dict]:
    """Every point record under ``out_dir/records``; a file that is not one is an error naming
    it (a figure silently missing points would mislead)."""
    paths = sorted((Path(out_dir) / "records").glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no figure records in {Path(out_dir) / 'records'}: run "
                                "`nntile-lab figures --out DIR` first")
    out = []
    for p in paths:
        rec = read_record(p)
        out.append(check_record(rec, p))
    return out


def record_model(rec: dict) -> str:
    """The model of a figure record's family (records from before the model choice: GPT-2)."""
    return rec["plan"].get("model") or "gpt2"


def points_frame(records: list[dict]) -> pd.DataFrame:
    """One row per point: model, system, precision (a record without one, measured before the
    bf16 series, is its series' — fp32 but for torch_bf16), n_layer, n_embd, params (the
    family's count: GPT-2's from the paper's formula, another model's as recorded when it was
    measured, so that redrawing needs no model registered), status,
    gflops (0 for a run that did not fit, NaN for one that failed: it measured nothing), step
    time, peak and memory by category; ``nntile`` (a series of nntile_lab) and ``failed``
    (failed for another reason than memory), which the plots (``plots.paper``) read."""
    rows = []
    for rec in records:
        r, plan = figure_result(rec), rec["plan"]
        vocab, model = plan.get("vocab_size"), record_model(rec)
        params = family_params(r["n_layer"], r["n_embd"], vocab) if model == "gpt2" \
            else r["params"]
        row = {"model": model, "system": r["system"],
               "precision": r.get("precision") or PRECISION.get(r["system"], "fp32"),
               "n_layer": r["n_layer"], "n_embd": r["n_embd"],
               "params": params,
               "status": r["status"],
               "gflops": float("nan") if failed(r["status"]) else float(r.get("gflops") or 0.0),
               "step_time_s": r.get("step_time_s"), "step_time_spread_s":
               r.get("step_time_spread_s"), "tokens_per_s": r.get("tokens_per_s"),
               "peak_mb": r.get("peak_mb"), "cap_mb": plan["cap_mb"],
               "out_of_core": bool(r.get("out_of_core")), "error": r.get("error"),
               "nntile": is_nntile(r["system"]), "failed": failed(r["status"])}
        # the device series: bytes per measured step each way between RAM and the device
        for name, (src, dst) in (("ram_to_device_mb", ("NUMA", "OpenCL")),
                                 ("device_to_ram_mb", ("OpenCL", "NUMA"))):
            row[name] = sum(b["bytes_per_step"] for b in r.get("buses") or ()
                            if b["src"].startswith(src) and b["dst"].startswith(dst)) / 2**20
        mem = r.get("memory") or {}
        ok, ooc = r["status"] == "ok", bool(r.get("out_of_core"))
        for c in CATEGORIES:
            row[f"{c}_mb"] = mem.get(c, 0) / 2**20 if ok and not ooc else 0.0
        row[f"{OOC_CATEGORY}_mb"] = float(r.get("peak_mb") or 0.0) if ok and ooc else 0.0
        rows.append(row)
    df = pd.DataFrame(rows)
    return df.sort_values(["n_layer", "n_embd", "system"], ignore_index=True)


def does_not_fit(plan: FigurePlan, n_layer: int, n_embd: int) -> str | None:
    """Why a point cannot fit before it runs (fp32 Adam alone, 16 B/parameter, is over the
    cap), or None; such a point is recorded as a 0 without spending minutes on it."""
    need = ADAM_BYTES_PER_PARAM * plan_params(n_layer, n_embd, plan)
    if need > plan.cap_mb * 2**20:
        return (f"fp32 weights, gradients and Adam state alone need {need / 2**20:.0f} MiB, "
                f"over the {plan.cap_mb} MiB cap")
    return None
