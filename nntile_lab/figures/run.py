"""Measure every point of a figure plan (each in its own process, through the engine), write
the records, draw."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from nntile_lab import engine
from nntile_lab.engine import Caps, Point, RecordError, read_record
from nntile_lab.figures.family import (
    PRECISION,
    SYSTEMS,
    FigurePlan,
    family_name,
    is_nntile,
    plan_params,
    series_spec,
)
from nntile_lab.figures.paper import SETUPS, reference_points
from nntile_lab.figures.records import (
    RECORD_KIND,
    check_record,
    does_not_fit,
    failed,
    figure_result,
    points_frame,
    read_records,
    record_path,
    set_aside,
    write_point_record,
)
from nntile_lab.figures.summary import write_summary
from nntile_lab.interrupts import Interrupted, check_stop, stoppable
from nntile_lab.plots import paper
from nntile_lab.plots.common import save, size_label

# what may differ between records drawn in one figure: which points a run measured (and
# the modules a point imports: where a model is registered, not what is measured)
POINT_FIELDS = ("layers", "embds", "systems", "bf16", "device", "imports")
# plan fields added later, as records from before them read (their value then)
PLAN_DEFAULTS = {"model": "gpt2"}

def point_list(plan: FigurePlan) -> list[tuple[str, int, int]]:
    """(system, n_layer, n_embd) for every point; the bf16 series only where plan.bf16, the
    device series only where plan.device."""
    systems = [s for s in plan.systems if (PRECISION[s] != "bf16" or plan.bf16)
               and (s != "nntile_lab_device" or plan.device)]
    return [(s, L, e) for L in plan.layers for e in plan.embds for s in systems]


def run_point(plan: FigurePlan, system: str, n_layer: int, n_embd: int) -> dict:
    """One point: a 0 without running when it cannot fit, else a subprocess bounded by
    ``plan.point_timeout_s``.  With ``plan.ooc``, nntile_lab goes out of core where it cannot
    fit in memory — known beforehand, or found by running over the cap in memory."""
    base = {"system": system, "precision": PRECISION[system], "n_layer": n_layer,
            "n_embd": n_embd, "params": plan_params(n_layer, n_embd, plan), "gflops": 0.0,
            "out_of_core": False,
            "spec": series_spec(system, n_layer, n_embd, plan).to_dict()}
    # the device series caps the device, not RAM: its overflow is RAM; a 0 only where a
    # task cannot fit on the device (the planner's verdict)
    reason = (_device_does_not_fit(plan, n_layer, n_embd) if system == "nntile_lab_device"
              else does_not_fit(plan, n_layer, n_embd))
    ooc_allowed = is_nntile(system) and system != "nntile_lab_device" and plan.ooc
    if reason and not ooc_allowed:
        return base | {"status": "does_not_fit", "error": reason}
    if not is_nntile(system):
        return _strongest_torch(plan, system, n_layer, n_embd, base)
    res = _run_process(plan, system, n_layer, n_embd, base, out_of_core=bool(reason))
    if ooc_allowed and not reason and res["status"] == "out_of_memory":
        res = _run_process(plan, system, n_layer, n_embd, base, out_of_core=True)
    return res


def _strongest_torch(plan, system, n_layer, n_embd, base) -> dict:
    """PyTorch eager and (``plan.torch_compile``) compiled, each in its own process under
    the cap: the faster that fitted, with both modes' outcomes under ``"modes"``; where
    neither ran, eager's failure."""
    modes = {"eager": _run_process(plan, system, n_layer, n_embd, base, out_of_core=False)}
    if plan.torch_compile:
        modes["compiled"] = _run_process(plan, system, n_layer, n_embd, base,
                                         out_of_core=False, compiled=True)
    ran = [m for m in modes if modes[m]["status"] == "ok"]
    best = max(ran, key=lambda m: modes[m]["gflops"]) if ran else "eager"
    return modes[best] | {"torch_mode": best, "modes": {
        m: {k: r.get(k) for k in ("status", "gflops", "step_time_s", "peak_mb", "error")}
        for m, r in modes.items()}}


def _device_does_not_fit(plan: FigurePlan, n_layer: int, n_embd: int) -> str | None:
    """Why the family member cannot run on a device capped at ``plan.cap_mb`` (its largest
    task's tiles do not fit there), or None."""
    # the planner sizes tasks from the model's shapes; measuring needs it, redrawing not
    from nntile_lab import memory
    spec = series_spec("nntile_lab_device", n_layer, n_embd, plan, nopencl=1,
                       opencl_memory_limit_mb=plan.cap_mb)
    verdict = memory.estimate(spec)
    return verdict.reason if verdict.verdict == "cannot_run" else None


def _run_process(plan, system, n_layer, n_embd, base, *, out_of_core: bool,
                 compiled: bool = False) -> dict:
    """One run of the point in its own process (``engine.run_point``; the measurement
    ``figure``), under the plan's cap and time limit: its result (``run_point``'s form)."""
    spec = series_spec(system, n_layer, n_embd, plan)
    cap = plan.cap_mb
    if system == "nntile_lab_device":   # the cap is the device's; RAM is its overflow,
        spec = spec.replace(nopencl=1, opencl_memory_limit_mb=plan.cap_mb)
        cap = None                       # measured, not capped
    options = {"system": system, "out_of_core": out_of_core}
    if compiled:
        options["compiled"] = True
    rec = engine.run_point(Point("figure", spec, options, Caps(memory_mb=cap,
                                                       timeout_s=plan.point_timeout_s),
                                 kind=RECORD_KIND, imports=tuple(plan.imports)))
    res = base | {"out_of_core": out_of_core} | figure_result(rec)
    if rec["status"] == "timeout":
        res["error"] = f"no result within {plan.point_timeout_s} s (point_timeout_s)"
    res["gflops"] = res.get("gflops") if res["status"] == "ok" else 0.0
    res["record_env"] = {"versions": rec["versions"], "cpu_variant": rec["cpu_variant"]}
    return res


def run_figures(plan: FigurePlan, out_dir: str | os.PathLike, *, resume: bool = True,
                progress=True) -> pd.DataFrame:
    """Measure the plan's points (a point whose record exists for the same plan is reused, so
    an interrupted run resumes), then draw everything into ``out_dir``. ``progress``: a line
    per point on stderr (True), on a stream of yours (a notebook passes ``sys.stdout``), or
    none (False).

    No measurement is ever deleted: records of other points measured with the same settings
    stay and are drawn too (a subset of sizes can be measured into an existing folder);
    records of other settings, damaged ones, and those a re-measurement replaces are moved
    to ``out_dir/records.set_aside/<time>/`` with a message."""
    plan = plan.with_bf16_resolved()
    out_dir = Path(out_dir)
    points = point_list(plan)
    want = _comparable(plan.to_dict())
    for p in sorted((out_dir / "records").glob("*.json")):
        rec = _read_or_none(p)
        if rec is None:
            set_aside(out_dir, p, "damaged: not a whole figure record")
        elif _comparable(rec["plan"]) != want:
            set_aside(out_dir, p, "measured with other settings than this run's")
    t0 = time.perf_counter()
    done = 0
    # a kernel interrupt or a Stop button stops it whichever thread runs it (interrupts.py)
    with stoppable():
        try:
            for i, (system, n_layer, n_embd) in enumerate(points, 1):
                check_stop()
                path = record_path(out_dir, system, n_layer, n_embd)
                if path.exists():
                    rec = _read_or_none(path)
                    if resume and rec is not None and _comparable(rec["plan"]) == want:
                        done += 1
                        continue
                    set_aside(out_dir, path, "measured again (--fresh)" if resume is False
                              else "measured again: this run's plan differs")
                res = run_point(plan, system, n_layer, n_embd)
                write_point_record(out_dir, plan, res)
                done += 1
                if progress:
                    _progress(progress, i, len(points), time.perf_counter() - t0, system,
                              n_layer, n_embd, res)
        except KeyboardInterrupt:
            raise Interrupted(f"figures stopped after {done} of {len(points)} points; the "
                              f"measured ones are recorded in {out_dir}: run it again to "
                              "resume") from None
    return redraw(out_dir)


def _progress(stream, i, n, seconds, system, n_layer, n_embd, res) -> None:
    print(f"[{i}/{n} {seconds:5.0f} s] {SYSTEMS[system]:22s} L={n_layer} E={n_embd}: "
          f"{res['status']}"
          + (f", {res['gflops']:.1f} GFLOP/s" if res["status"] == "ok" else "")
          + (f" ({res.get('error')})" if res["status"] != "ok" else ""),
          file=stream if hasattr(stream, "write") else sys.stderr, flush=True)


def _comparable(plan: dict) -> dict:
    plan = PLAN_DEFAULTS | json.loads(json.dumps(plan))
    return {k: v for k, v in plan.items() if k not in POINT_FIELDS}


def _read_or_none(path: Path) -> dict | None:
    try:
        return check_record(read_record(path), path)
    except RecordError:
        return None


def _with_failures(table: pd.DataFrame, df: pd.DataFrame, n_layer: int) -> pd.DataFrame:
    """The throughput table with a "<system> failed" column giving each failed point's
    reason (its GFLOP/s cell is empty: it measured nothing; 0 means it did not fit)."""
    bad = df[(df.n_layer == n_layer) & df.status.map(failed)]
    table = table.copy()
    for system, g in bad.groupby("system"):
        why = {size_label(r.params): f"{r.status}: {r.error}" for _, r in g.iterrows()}
        table[f"{system} failed"] = [why.get(size, "") for size in table.index]
    return table


def redraw(records_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None
           ) -> pd.DataFrame:
    """Draw every figure, its CSV and the summary from ``records_dir/records`` alone (no
    StarPU, no torch needed) into ``out_dir`` (default: ``records_dir``; created)."""
    records = read_records(Path(records_dir))
    out_dir = Path(records_dir if out_dir is None else out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    df = points_frame(records)
    models = sorted(df.model.unique())
    if len(models) > 1:
        raise ValueError(f"{Path(records_dir) / 'records'} holds records of the models "
                         f"{', '.join(models)}: one figure folder is one family (measure each "
                         "model into its own --out)")
    cap = float(df.cap_mb.iloc[0])
    layers = sorted(df.n_layer.unique())
    panels = iter("abcdefgh")
    where = _where(records, df)
    family = family_name(models[0])
    for n_layer in layers:
        save(paper.throughput_figure(df, n_layer, cap, SYSTEMS, f"({next(panels)}) ",
                                     family=family, where=where), out_dir,
             f"throughput_L{n_layer}", _with_failures(paper.throughput_table(df, n_layer,
                                                                             SYSTEMS),
                                                      df, n_layer))
    for n_layer in layers:   # the paper's setting, where measured (--device)
        if len(paper.device_table(df, n_layer)):
            save(paper.device_figure(df, n_layer, cap, f"({next(panels)}) "), out_dir,
                 f"device_transfers_L{n_layer}", paper.device_table(df, n_layer))
    mem_layers = 4 if 4 in layers else layers[0]
    save(paper.memory_figure(df, mem_layers, cap, SYSTEMS, f"({next(panels)}) ",
                             family=family, where=where), out_dir,
         f"memory_L{mem_layers}", paper.memory_table(df, mem_layers, SYSTEMS))
    ref = reference_points()
    save(paper.reference_figure(ref, SETUPS), out_dir, "paper_reference",
         ref.set_index("setup"))
    df.to_csv(out_dir / "points.csv", index=False)
    write_summary(df, records, out_dir)
    return df


def _where(records: list[dict], df: pd.DataFrame) -> str:
    """What a figure's second title line says: the CPU the points ran on (the first
    record's), its cores and the precisions drawn."""
    m = records[0].get("machine") or {}
    cpu = m.get("cpu") or m.get("cpu_model") or "CPU not recorded"
    cores = f", {m['cores']} cores" if m.get("cores") else ""
    precisions = " and ".join(p for p in ("fp32", "bf16") if p in set(df.precision))
    return f"{cpu}{cores}; {precisions or 'fp32'}"
