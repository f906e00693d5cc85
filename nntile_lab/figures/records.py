"""Figure records: one JSON file per point (the plan, the point's result, versions, machine),
and the table every figure is drawn from.  Reading them needs neither StarPU nor torch."""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import pandas as pd

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.figures.family import (
    ADAM_BYTES_PER_PARAM,
    PRECISION,
    FigurePlan,
    family_params,
)
from nntile_lab.record import environment as shared_environment
from nntile_lab.record import json_safe

RECORD_KIND = "figure_point"
RECORD_VERSION = 1
CATEGORIES = ("parameters", "gradients", "optimizer state", "activations")
# an out-of-core run holds part of the first three on disk: its bar is what it held in RAM
OOC_CATEGORY = "in RAM, rest on disk"
# a point that did not fit is a 0 (as the paper's missing bars); any other status but "ok"
# is a failure (a configuration error, a crash, a timeout): shown as failed, with its reason
MEMORY_STATUSES = ("does_not_fit", "out_of_memory")
SET_ASIDE = "records.set_aside"


def record_path(out_dir: Path, system: str, n_layer: int, n_embd: int) -> Path:
    return Path(out_dir) / "records" / f"{system}_L{n_layer}_E{n_embd}.json"


def environment() -> dict:
    """``{"git_commit", "versions", "machine"}`` of this run: ``nntile_lab.record``'s, the
    one definition of what a record says about its software and machine."""
    return shared_environment()


def write_point_record(out_dir: Path, plan: FigurePlan, result: dict) -> Path:
    """Atomically write the point's record (the figure can be redrawn from these alone)."""
    rec = {"kind": RECORD_KIND, "record_version": RECORD_VERSION,
           "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "plan": plan.to_dict(), "result": result, **environment()}
    path = record_path(out_dir, result["system"], result["n_layer"], result["n_embd"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(path, (json.dumps(json_safe(rec), indent=1) + "\n").encode())


def failed(status: str) -> bool:
    """A point that neither ran nor failed for memory."""
    return status != "ok" and status not in MEMORY_STATUSES


def set_aside(out_dir: Path, path: Path, why: str) -> Path:
    """Move a record out of ``out_dir/records`` (never delete a measurement) into
    ``out_dir/records.set_aside/<time>/``, saying so on stderr."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    dest_dir = Path(out_dir) / SET_ASIDE / stamp
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / Path(path).name
    n = 1
    while dest.exists():   # the same point set aside twice within one second
        n += 1
        dest = dest_dir / f"{Path(path).stem}.{n}{Path(path).suffix}"
    Path(path).replace(dest)
    print(f"nntile-lab figures: moved {path} to {dest} ({why})", file=sys.stderr)
    return dest


def check_record(rec, path) -> dict:
    """``rec`` if it is a whole figure record, else ValueError naming ``path`` and what is
    wrong (a record cut short or edited by hand must not crash the drawing or be drawn)."""
    if not isinstance(rec, dict):
        raise ValueError(f"{path} is not a figure record (a JSON {type(rec).__name__}, not an "
                         "object); rerun that point")
    if rec.get("kind") != RECORD_KIND or rec.get("record_version") != RECORD_VERSION:
        raise ValueError(f"{path} is not a figure record of version {RECORD_VERSION} (kind "
                         f"{rec.get('kind')!r}, version {rec.get('record_version')!r}); "
                         "rerun that point")
    r, plan = rec.get("result"), rec.get("plan")
    problems = []
    if not isinstance(plan, dict):
        problems.append("no plan")
    else:
        for k in ("cap_mb", "vocab_size"):
            if not _number(plan.get(k)):
                problems.append(f"plan.{k}={plan.get(k)!r}")
    if not isinstance(r, dict):
        problems.append("no result")
    else:
        if not isinstance(r.get("system"), str):
            problems.append(f"result.system={r.get('system')!r}")
        for k in ("n_layer", "n_embd"):
            if not isinstance(r.get(k), int) or isinstance(r.get(k), bool) or r.get(k) < 1:
                problems.append(f"result.{k}={r.get(k)!r}")
        if not isinstance(r.get("status"), str):
            problems.append(f"result.status={r.get('status')!r}")
        for k in ("gflops", "peak_mb", "step_time_s", "tokens_per_s"):
            if r.get(k) is not None and not _number(r.get(k)):
                problems.append(f"result.{k}={r.get(k)!r}")
        if r.get("status") == "ok" and not _number(r.get("gflops")):
            problems.append("an ok result without gflops")
        if r.get("memory") is not None and not (
                isinstance(r["memory"], dict) and all(_number(v) for v in r["memory"].values())):
            problems.append("result.memory is not a table of byte counts")
    if problems:
        raise ValueError(f"{path} is a damaged figure record ({', '.join(problems)}); rerun "
                         "that point (`nntile-lab figures` measures it again)")
    return rec


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def read_records(out_dir: Path) -> list[dict]:
    """Every point record under ``out_dir/records``; a file that is not one is an error naming
    it (a figure silently missing points would mislead)."""
    paths = sorted((Path(out_dir) / "records").glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no figure records in {Path(out_dir) / 'records'}: run "
                                "`nntile-lab figures --out DIR` first")
    out = []
    for p in paths:
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p} is not a readable JSON record ({exc}); delete it and rerun "
                             "that point") from exc
        out.append(check_record(rec, p))
    return out


def points_frame(records: list[dict]) -> pd.DataFrame:
    """One row per point: system, precision (a record without one, measured before the
    bf16 series, is its series' — fp32 but for torch_bf16), n_layer, n_embd, params (the
    family's count), status,
    gflops (0 for a run that did not fit, NaN for one that failed: it measured nothing), step
    time, peak and memory by category."""
    rows = []
    for rec in records:
        r, plan = rec["result"], rec["plan"]
        vocab = plan.get("vocab_size")
        row = {"system": r["system"],
               "precision": r.get("precision") or PRECISION.get(r["system"], "fp32"),
               "n_layer": r["n_layer"], "n_embd": r["n_embd"],
               "params": family_params(r["n_layer"], r["n_embd"], vocab),
               "status": r["status"],
               "gflops": float("nan") if failed(r["status"]) else float(r.get("gflops") or 0.0),
               "step_time_s": r.get("step_time_s"), "step_time_spread_s":
               r.get("step_time_spread_s"), "tokens_per_s": r.get("tokens_per_s"),
               "peak_mb": r.get("peak_mb"), "cap_mb": plan["cap_mb"],
               "out_of_core": bool(r.get("out_of_core")), "error": r.get("error")}
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
    need = ADAM_BYTES_PER_PARAM * family_params(n_layer, n_embd, plan.vocab_size)
    if need > plan.cap_mb * 2**20:
        return (f"fp32 weights, gradients and Adam state alone need {need / 2**20:.0f} MiB, "
                f"over the {plan.cap_mb} MiB cap")
    return None
