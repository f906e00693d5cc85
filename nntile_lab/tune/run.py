"""``tune(spec, budget=...)``: the tiling with the highest measured throughput, found in a
fraction of an exhaustive sweep's time.

1. The grid (``tune.space``): the tile values worth trying; points that are not valid specs,
   and those the memory planner says cannot run under the spec's caps, are dropped.
2. Every candidate is ranked by its predicted step (``tune.predict``: the step's task graph
   from a dry run, each task priced by its codelet's model, replayed on the workers).
3. The best-predicted candidates are measured one by one (engine points, the sweep's
   measurement: a trace each); after each, the codelets' models are refitted from its trace
   and the others re-ranked. Exploration stops when the next candidate is predicted slower
   than the best measured one by more than the predictions' own error, or when the budget
   cannot pay for another point.
4. Successive halving on what is left of the budget: the best two are measured again with
   another seed and the better of the pooled medians wins.

Measured points are engine records in the sweep's store (same measurement, same key: a tune
and a sweep reuse each other's points), so an interrupted tune keeps every point it measured
and a second run resumes from them at no cost.
"""
from __future__ import annotations

import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nntile_lab import perfmodels, sgemm_peak
from nntile_lab.engine import Store, measure_or_reuse, save_record
from nntile_lab.errors import UsageError
from nntile_lab.interrupts import Interrupted, check_stop, running_kernel, stoppable
from nntile_lab.jupyter_figure import save_figure
from nntile_lab.plots.tune import figure
from nntile_lab.spec import DEFAULTS, TILE_FIELDS, ExperimentSpec, spec_fields
from nntile_lab.sweep.run import (
    POINT_TIMEOUT_S,
    check_importable,
    precheck,
    row,
    sweep_point,
)
from nntile_lab.tune.predict import Predictor, workers_of
from nntile_lab.tune.space import feasible, space

# before the first measured point: a point's process start-up (Python, numpy, the
# extension, StarPU, the model) — the measured points replace it
START_S = 4.0
MIN_POINTS = 3            # measured before exploration may stop on the predictions' word
MAX_FAILURES = 3          # points failing in a row, none fitting yet: the tune stops
MIN_MARGIN = 0.05         # explore candidates predicted within this of the best measured
CONFIRM = 2               # the best this many are measured again (successive halving)
SAFETY = 1.25             # a point starts only if the budget left pays this × its estimate


def parse_budget(budget) -> float:
    """Seconds from a number or "90s", "3m", "1.5h"; UsageError otherwise."""
    if isinstance(budget, (int, float)) and not isinstance(budget, bool):
        seconds = float(budget)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*", str(budget))
        if not m:
            raise UsageError(f"--budget {budget!r}: give seconds or a duration such as 90s, "
                             "3m, 1h")
        seconds = float(m.group(1)) * {"s": 1, None: 1, "m": 60, "min": 60,
                                       "h": 3600}[m.group(2)]
    if not 0 < seconds < math.inf:
        raise UsageError(f"--budget {budget!r}: must be a positive duration")
    return seconds


@dataclass
class TuneResult:
    """What a tune found: ``best`` (the chosen spec), its measured ``gflops`` and
    ``step_time_s``, ``table`` (every candidate: predicted and, where measured, measured),
    the ``command`` that trains with it, and the record's and figure's paths."""

    best: ExperimentSpec | None
    gflops: float | None
    step_time_s: float | None
    axes: list
    table: pd.DataFrame
    command: str
    elapsed_s: float
    budget_s: float
    messages: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    # per measured point and codelet: µs per step predicted just before it, and measured
    codelets: pd.DataFrame | None = None

    def codelet_errors(self) -> pd.DataFrame:
        """Per codelet, over the measured points: predicted and measured µs per step and
        their ratio, the worst first — which codelet's model ranked badly."""
        c = self.codelets
        if c is None or not len(c):
            return pd.DataFrame(columns=["op", "predicted_us", "measured_us", "ratio"])
        g = c.groupby("op")[["predicted_us", "measured_us"]].sum().reset_index()
        g["ratio"] = g["predicted_us"] / g["measured_us"].where(g["measured_us"] > 0)
        g["off_us"] = (g["predicted_us"] - g["measured_us"]).abs()
        return g.sort_values("off_us", ascending=False).reset_index(drop=True)

    def report(self) -> str:
        if self.best is None:
            return "tune: no candidate was measured"
        measured = self.table[self.table["measured_step_s"].notna()]
        chosen = ", ".join(f"{a}={getattr(self.best, a)}" for a in self.axes)
        return (f"best tiling: {chosen}: {self.gflops:.1f} GFLOP/s, "
                f"{self.step_time_s * 1e3:.0f} ms/step ({len(measured)} of "
                f"{int((self.table['status'] != 'pruned').sum())} candidates measured in "
                f"{self.elapsed_s:.0f} s of a {self.budget_s:.0f} s budget)\n"
                f"train with it: {self.command}")

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.report())


def command_line(spec: ExperimentSpec, tiles) -> str:
    """``nntile-lab train`` with the options that give ``spec``: the ``tiles`` always, the
    other model, data, tile and runtime fields where they differ from the defaults."""
    parts = ["nntile-lab train"]
    for group in ("model", "data", "tiles", "runtime"):
        for f in spec_fields(group):
            v = getattr(spec, f.name)
            if f.name not in tiles and v == getattr(DEFAULTS, f.name):
                continue
            opt = "--" + f.name.replace("_", "-")
            if isinstance(v, bool):
                parts.append(opt if v else f"--no-{f.name.replace('_', '-')}")
            else:
                parts.append(f"{opt} {'none' if v is None else v}")
    return " ".join(parts)


def tune(spec: ExperimentSpec, budget="3m", *, axes: dict | None = None, cache_dir=None,
         out=None, progress=True, stop=None, isolate: bool = True,
         peak_gflops: float | None = None, timeout_s: float = POINT_TIMEOUT_S,
         on_point=None) -> TuneResult:
    """Find the tiling of ``spec`` with the highest measured throughput within ``budget``
    (seconds, or "90s", "3m", "1h"; module docstring). ``axes``: tile field → values to
    try (one value fixes it; default the tuner's own grid, ``tune.space``). ``cache_dir``:
    the point store (default the sweep's). ``out``: where tune.json (the record) and
    tune.png go. ``progress``: a bar and a line per point on stderr. ``stop``: an event
    that ends it (as a kernel interrupt or a Stop button does); finished points are kept.
    ``on_point(table)``: called after each measured point with the candidates' table so
    far (a widget redraws predicted against measured from it).

    Bad input is one clear UsageError before any point: a budget too small for one point,
    no tiling that fits, nothing to vary; a ValueError for a model defined in this notebook
    or script only (``__main__``) unless ``isolate=False``."""
    if not isinstance(spec, ExperimentSpec):
        raise TypeError(f"tune takes an ExperimentSpec, got {type(spec).__name__}")
    budget_s = parse_budget(budget)
    if isolate:   # a notebook's own model class: its points cannot leave this process
        check_importable(spec)
    t0 = time.perf_counter()
    say = _say(progress)
    sp = space(spec, axes)
    if not sp.candidates:
        why = sp.invalid[0][1] if sp.invalid else "the grid is empty"
        raise UsageError(f"no tiling of the grid is a valid spec ({len(sp.invalid)} tried), "
                         f"e.g. {why}")
    fits, pruned = feasible(sp, _runnable)
    if not fits:
        raise UsageError(f"no tiling of the {len(sp.candidates)} candidates fits: "
                         f"{pruned[0][1]} (raise the memory cap, or give smaller tiles)")
    peak = peak_gflops or sgemm_peak.gflops()
    predictor = Predictor(peak / max(1, workers_of(spec)), history=perfmodels.history())
    preds = {s.key(): predictor.predict(s) for s in fits}
    store = Store(cache_dir)
    messages: list[str] = []
    state = _State(spec, sp, fits, preds, predictor, store, budget_s, t0, peak, timeout_s,
                   isolate, stop, messages, say)
    state.pruned, state.on_point = pruned, on_point
    first = min(fits, key=lambda s: preds[s.key()].step_s)
    need = state.cost(first)
    if not state.cached(first) and need > budget_s - state.elapsed():
        raise UsageError(f"--budget {budget_s:.0f} s is too small to measure one point: the "
                         f"quickest candidate ({sp.label(first)}) takes about {need:.0f} s "
                         f"(start-up and {spec.warmup_steps + spec.measure_steps} steps); give "
                         f"--budget {math.ceil(need + state.elapsed()) + 1} or more")
    bar = tqdm(total=round(budget_s), unit="s", desc="tune", disable=not progress,
               dynamic_ncols=True, bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s{postfix}")
    try:
        with stoppable():
            state.bar = bar
            state.explore()
            state.confirm()
    except KeyboardInterrupt:
        raise Interrupted(f"tune stopped after {len(state.measured)} measured points; they "
                          f"are kept in {store.dir}: run the same tune again to resume from "
                          "them") from None
    finally:
        bar.close()
    return state.result(out)


def _runnable(spec: ExperimentSpec) -> None:
    """The planner's and the runtime's verdict before any point (ValueError: cannot run)."""
    why = precheck(spec)
    if why is not None:
        raise ValueError(why[1])


def _say(progress):
    """Where a line per point goes: ``progress`` if it is a stream, else stderr (the
    command line's convention) — or, in a Jupyter kernel, stdout (stderr is the pink of
    an error there)."""
    if not progress:
        return lambda line: None
    stream = progress if hasattr(progress, "write") else (
        sys.stdout if running_kernel() is not None else sys.stderr)
    return lambda line: tqdm.write(line, file=stream)


class _State:
    """One tune's bookkeeping: predictions, measured points, the budget."""

    def __init__(self, spec, sp, fits, preds, predictor, store, budget_s, t0, peak,
                 timeout_s, isolate, stop, messages, say):
        self.spec, self.sp, self.fits, self.preds = spec, sp, fits, preds
        self.predictor, self.store, self.budget_s, self.t0 = predictor, store, budget_s, t0
        self.peak, self.timeout_s, self.isolate, self.stop = peak, timeout_s, isolate, stop
        self.messages, self.say = messages, say
        self.measured: dict[str, dict] = {}     # spec key → row (sweep's) + bookkeeping
        self.specs = {s.key(): s for s in fits}
        self.first_pred: dict[str, float] = {k: p.step_s for k, p in preds.items()}
        self.start_s = START_S
        self.bar = None
        self.pruned: list = []
        self.on_point = None
        # per measured point and codelet: µs per step predicted just before, and measured
        self.codelet_errors: list[dict] = []

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def point(self, spec: ExperimentSpec):
        p = sweep_point(spec, timeout_s=self.timeout_s, peak_gflops=self.peak)
        p.inputs["calibrate"] = True     # StarPU's models learn from it (not in the key)
        return p

    def cached(self, spec: ExperimentSpec) -> bool:
        rec, _ = self.store.load(self.point(spec).key(), kind="sweep-point")
        return rec is not None

    def cost(self, spec: ExperimentSpec) -> float:
        """Seconds one point of ``spec`` takes: start-up and its steps."""
        steps = spec.warmup_steps + spec.measure_steps
        return self.start_s + steps * self.preds[spec.key()].step_s

    def measure(self, spec: ExperimentSpec, why: str) -> dict:
        check_stop()
        p = self.point(spec)
        t = time.perf_counter()
        rec, cached = measure_or_reuse(p, self.store, isolate=self.isolate, keep_trace=True,
                                       stop=self.stop, messages=self.messages)
        wall = time.perf_counter() - t
        r = row(spec.to_dict(), rec, cached, p.key(), self.peak)
        pred = self.preds[spec.key()]
        r |= {"predicted_step_s": pred.step_s, "round": why, "order": len(self.measured) + 1,
              "spec_key": spec.key()}
        if rec["status"] == "fits":
            steps = spec.warmup_steps + spec.measure_steps
            if not cached:   # what a point costs besides its steps: the next estimates'
                self.start_s = max(0.5, wall - steps * r["step_time_s"])
            self._learn(spec, rec, r["step_time_s"])
        self.measured.setdefault(spec.key(), r)
        self._tell(spec, r, cached)
        return r

    def _learn(self, spec, rec, step_s) -> None:
        trace_dir = rec.get("trace_dir")
        tasks = pd.DataFrame()
        if trace_dir:
            # the trace's reader loads the compiled extension (a tune runs points anyway)
            from nntile_lab.trace import Trace
            try:
                tasks = Trace.load(trace_dir).tasks
            except (OSError, ValueError) as exc:
                self.messages.append(f"the trace of {self.sp.label(spec)} cannot be read "
                                     f"({exc}): its tasks do not refine the models")
        if len(tasks) and "step" in tasks:   # where the models were wrong, by codelet
            steps = max(1, tasks["step"].nunique())
            got = tasks.groupby("name")["duration_us"].sum() / steps
            want = self.predictor.per_codelet(spec)
            for op in sorted(set(got.index) | set(want.index)):
                self.codelet_errors.append({
                    "point": self.sp.label(spec), "order": len(self.measured) + 1, "op": op,
                    "predicted_us": float(want.get(op, 0.0)),
                    "measured_us": float(got.get(op, 0.0))})
        self.predictor.learn(spec, tasks, step_s)
        for s in self.fits:   # re-rank every candidate with the refined models
            self.preds[s.key()] = self.predictor.predict(s)

    def _tell(self, spec, r, cached) -> None:
        if self.bar is not None:
            self.bar.n = min(self.bar.total, round(self.elapsed()))
            best = self.best()
            if best is not None:
                self.bar.set_postfix_str(f"best {best['gflops']:.1f} GFLOP/s")
            self.bar.refresh()
        if r["status"] == "fits":
            self.say(f"[{r['order']}] {self.sp.label(spec)}: predicted "
                     f"{r['predicted_step_s'] * 1e3:.0f} ms, measured "
                     f"{r['step_time_s'] * 1e3:.0f} ms = {r['gflops']:.1f} GFLOP/s"
                     + (" (cached)" if cached else ""))
        else:
            self.say(f"[{r['order']}] {self.sp.label(spec)}: {r['status']}: {r['error']}")
        if self.on_point is not None:
            self.on_point(self.table())

    def best(self) -> dict | None:
        ok = [r for r in self.measured.values() if r["status"] == "fits"]
        return max(ok, key=lambda r: r["gflops"]) if ok else None

    def margin(self) -> float:
        """How far off the predictions were on the measured points (relative)."""
        errs = [abs(r["predicted_step_s"] - r["step_time_s"]) / r["step_time_s"]
                for r in self.measured.values() if r["status"] == "fits"]
        return max(MIN_MARGIN, 2 * statistics.median(errs)) if errs else 1.0

    def explore(self) -> None:
        while True:
            todo = sorted((s for s in self.fits if s.key() not in self.measured),
                          key=lambda s: self.preds[s.key()].step_s)
            if not todo:
                return
            nxt, best = todo[0], self.best()
            if best is not None and len(self.measured) >= MIN_POINTS and \
                    self.preds[nxt.key()].step_s > best["step_time_s"] * (1 + self.margin()):
                self.messages.append(f"stopped exploring after {len(self.measured)} points: "
                                     f"the next candidate ({self.sp.label(nxt)}) is predicted "
                                     f"{self.preds[nxt.key()].step_s * 1e3:.0f} ms, slower "
                                     f"than the best measured "
                                     f"{best['step_time_s'] * 1e3:.0f} ms by more than the "
                                     f"predictions' error ({self.margin():.0%})")
                return
            if not self.cached(nxt) and SAFETY * self.cost(nxt) > self.left():
                self.messages.append(f"the budget ended after {len(self.measured)} points")
                return
            r = self.measure(nxt, "explore")
            failed = [x for x in self.measured.values() if x["status"] != "fits"]
            if best is None and r["status"] != "fits" and len(failed) >= MAX_FAILURES:
                self.messages.append(f"stopped: the first {len(failed)} points failed (the "
                                     f"last: {r['error']}); fix that and run it again")
                return

    def confirm(self) -> None:
        """The best ``CONFIRM`` measured, each measured again with another seed (while the
        budget pays for it); the better pooled median wins."""
        ok = sorted((r for r in self.measured.values() if r["status"] == "fits"),
                    key=lambda r: r["step_time_s"])[:CONFIRM]
        if len(ok) < 2:
            return
        again = []
        for r in ok:
            spec = self.specs[r["spec_key"]]
            twin = spec.replace(seed=spec.seed + 1)
            self.preds.setdefault(twin.key(), self.preds[spec.key()])
            if not self.cached(twin) and SAFETY * self.cost(twin) > self.left():
                return
            again.append((r, twin))
        for r, twin in again:
            t = self.point(twin)
            rec, cached = measure_or_reuse(t, self.store, isolate=self.isolate,
                                           stop=self.stop, messages=self.messages)
            if rec["status"] == "fits":
                r["confirm_step_s"] = rec["results"]["step_time_s"]
                r["pooled_step_s"] = statistics.median([r["step_time_s"],
                                                        rec["results"]["step_time_s"]])
                self.say(f"[again] {self.sp.label(twin)}: measured "
                         f"{rec['results']['step_time_s'] * 1e3:.0f} ms"
                         + (" (cached)" if cached else ""))

    def chosen(self) -> dict | None:
        ok = [r for r in self.measured.values() if r["status"] == "fits"]
        if not ok:
            return None
        return min(ok, key=lambda r: r.get("pooled_step_s") or r["step_time_s"])

    def table(self) -> pd.DataFrame:
        """Every candidate: its tiles, prediction (now, before any measurement, and for a
        measured one when it was measured), the replay's bounds, and where measured, its
        measurement; then the pruned ones."""
        rows = []
        for s in self.fits:
            r = self.measured.get(s.key())
            p = self.preds[s.key()]
            base = {a: getattr(s, a) for a in TILE_FIELDS} | {
                "status": "not measured", "predicted_step_s": p.step_s,
                "predicted_gflops": s.flops_per_step() / p.step_s / 1e9,
                "first_predicted_step_s": self.first_pred.get(s.key()),
                "critical_path_ms": p.critical_path_us * 1e-3,
                "work_per_worker_ms": p.work_per_worker_us * 1e-3,
                "submission_ms": p.submission_us * 1e-3, "tasks": p.tasks, "bound": p.bound,
                "predicted_then_s": None, "measured_step_s": None, "measured_gflops": None,
                "order": None, "cached": None, "error": None}
            if r is not None:
                step = r.get("pooled_step_s") or r.get("step_time_s")
                base |= {"status": r["status"], "measured_step_s": step,
                         "predicted_then_s": r["predicted_step_s"],
                         "measured_gflops": None if step is None else
                         s.flops_per_step() / step / 1e9, "order": r["order"],
                         "cached": r["cached"], "error": r["error"]}
            rows.append(base)
        for s, why in self.pruned:
            rows.append({a: getattr(s, a) for a in TILE_FIELDS} | {"status": "pruned",
                                                                  "error": why})
        return pd.DataFrame(rows)

    def result(self, out) -> TuneResult:
        table = self.table()
        best = self.chosen()
        spec = None if best is None else self.specs[best["spec_key"]]
        step = None if best is None else best.get("pooled_step_s") or best["step_time_s"]
        axes = list(self.sp.axes)
        res = TuneResult(spec, None if spec is None else spec.flops_per_step() / step / 1e9,
                         step, axes, table,
                         "" if spec is None else command_line(spec, axes), self.elapsed(),
                         self.budget_s, self.messages,
                         codelets=pd.DataFrame(self.codelet_errors,
                                               columns=["point", "order", "op",
                                                        "predicted_us", "measured_us"]))
        if out is not None:
            res.files = write(res, self.spec, self.predictor, out)
        return res


def write(res: TuneResult, base: ExperimentSpec, predictor, out) -> dict:
    """tune.json (the record) and tune.png (measured against predicted) in ``out``."""
    out = Path(out)
    paths = {"json": out / "tune.json", "png": out / "tune.png"}
    save_record(paths["json"], "tune", res.best, {
        "chosen": None if res.best is None else {a: getattr(res.best, a) for a in res.axes},
        "gflops": res.gflops, "step_time_s": res.step_time_s, "command": res.command,
        "elapsed_s": res.elapsed_s, "budget_s": res.budget_s,
        "candidates": res.table.replace({np.nan: None}).to_dict("records"),
        "codelets": predictor.model.table().to_dict("records"),
        "codelet_errors": res.codelet_errors().to_dict("records"),
        "submit_us": predictor.submit_us, "scale": predictor.scale},
        base=base.to_dict(), axes=res.axes, messages=res.messages)
    save_figure(figure(res.table, res.axes, title=f"tune: {len(res.table)} candidates"),
                paths["png"])
    return {k: str(v) for k, v in paths.items()}
