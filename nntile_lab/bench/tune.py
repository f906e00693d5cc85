"""``nntile-lab bench tune``: does ``tune`` find the best tiling in a fraction of a sweep's time?

For each setting, one run measures both on the same candidate grid: the exhaustive sweep
(every candidate, ``sweep.run``) and ``tune`` (given the sweep's wall time × ``share`` as its
budget), each with a fresh point store of its own (neither reuses the other's points). The
target: the tiling tune chooses runs at ≥ 0.97 of the best throughput the sweep found —
both throughputs as the sweep measured them, so a noisy minute of a shared machine during
the tune cannot decide it — in ≤ 25 % of the sweep's wall time.

Settings (``SETTINGS``; each a base spec and its grid, sized for a 2-core machine): the main
job, n_embd 1024, the main job under a RAM cap that puts it out of core, the main job on one
CPU and one OpenCL worker (PoCL), and the Llama of the main job's sizes (``--model llama``:
RMS norms, rotary positions, a gated MLP of 768).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nntile_lab import memory, perfmodels, sweep
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.engine import save_record
from nntile_lab.plots.sweep import ok_rows
from nntile_lab.spec import DEFAULTS, TILE_FIELDS, ExperimentSpec
from nntile_lab.tune import tune

SHARE = 0.25           # tune's budget: this share of the sweep's wall time
TARGET = 0.97          # the throughput of tune's choice against the sweep's best


@dataclass(frozen=True)
class Setting:
    name: str
    base: ExperimentSpec
    axes: dict
    says: str
    out_of_core: bool = False    # StarPU's RAM capped at half the planned peak, a disk node


def _main(**kw) -> ExperimentSpec:
    return DEFAULTS.replace(warmup_steps=1, measure_steps=2, **kw)


def _out_of_core(spec: ExperimentSpec, axes: dict, ooc_dir: str,
                 fraction: float = 0.5) -> ExperimentSpec:
    """``spec`` with StarPU's RAM capped at ``fraction`` of the smallest planned peak of the
    grid (every candidate goes to disk) and a disk node in ``ooc_dir``."""
    peak = min(memory.estimate(p).peak_bytes for p in sweep.grid(spec, **axes)
               if isinstance(p, ExperimentSpec))
    return spec.replace(memory_limit_mb=max(16, int(peak * fraction) >> 20), ooc_dir=ooc_dir,
                        ooc_size_mb=max(256, 4 * peak >> 20))


NAMES = ("main job", "n_embd 1024", "main job out of core", "CPU + OpenCL", "Llama")
MAIN_AXES = {"batch_tile": [2, 4, 8], "inner_tile": [256, 512, 1024],
             "vocab_tile": [4096, 8192, 16384, 50257]}
# --smoke: the same five settings on models that measure in seconds (the code path, for CI)
SMOKE = dict(n_layer=1, n_head=2, n_embd=64, vocab_size=2048, seq_len=32, batch=4)
SMOKE_AXES = {"batch_tile": [2, 4], "vocab_tile": [512, 2048]}


def settings(names=None, smoke: bool = False) -> list[Setting]:
    """The five settings of the target (module docstring), or those in ``names``; ``smoke``:
    each on a tiny model and a 2×2 grid."""
    if smoke:
        out = [Setting(n, _main(**(SMOKE | kw)), SMOKE_AXES, f"smoke: {n}", ooc)
               for n, kw, ooc in (("main job", {}, False),
                                  ("n_embd 1024", {"n_embd": 128, "n_head": 4}, False),
                                  ("main job out of core", {"vocab_size": 50257}, True),
                                  ("CPU + OpenCL", {"ncpu": 1, "nopencl": 1}, False),
                                  ("Llama", {"model": "llama"}, False))]
    else:
        out = [
            Setting("main job", _main(), MAIN_AXES, "L4 E256 T128 B8 V50257"),
            Setting("n_embd 1024", _main(n_embd=1024, n_head=16),
                    {"batch_tile": [2, 4, 8], "inner_tile": [512, 1024, 2048, 4096],
                     "head_tile": [4, 8, 16]}, "L4 E1024 H16 T128 B8 V50257"),
            Setting("main job out of core", _main(),
                    {"batch_tile": [2, 4, 8], "inner_tile": [256, 512, 1024],
                     "vocab_tile": [4096, 8192, 16384]},
                    "the main job, StarPU's RAM capped at half its planned peak, a disk node",
                    out_of_core=True),
            Setting("CPU + OpenCL", _main(ncpu=1, nopencl=1),
                    {"batch_tile": [2, 4, 8], "inner_tile": [256, 512, 1024],
                     "vocab_tile": [4096, 8192, 16384]},
                    "the main job on one CPU worker and one OpenCL worker (PoCL)"),
            Setting("Llama", _main(model="llama"),
                    {"batch_tile": [2, 4, 8], "inner_tile": [192, 384, 768],
                     "vocab_tile": [4096, 8192, 16384, 50257]},
                    "the Llama of the main job's sizes: L4 E256 H4 T128 B8 V50257, MLP 768"),
        ]
    names = NAMES if names is None else names
    return [s for s in out if s.name in names]


def run_setting(s: Setting, share: float = SHARE, progress=None) -> dict:
    """The sweep and the tune of one setting, measured one after the other in this run."""
    say = progress or (lambda line: None)
    with tempfile.TemporaryDirectory(prefix="nl-bench-tune-") as tmp:
        if s.out_of_core:
            Path(tmp, "ooc").mkdir()
        base = _out_of_core(s.base, s.axes, f"{tmp}/ooc") if s.out_of_core else s.base
        # the grid is exactly the setting's axes: every other tile stays the base's
        axes = {f: [getattr(base, f)] for f in TILE_FIELDS} | s.axes
        grid = sweep.grid(base, **s.axes)
        t0 = time.perf_counter()
        with _models_apart(f"{tmp}/sweep_models"):
            df = sweep.run(grid, f"{tmp}/sweep", progress=False, keep_traces=False)
        sweep_s = time.perf_counter() - t0
        good = ok_rows(df)
        if not len(good):
            return {"setting": s.name, "error": "no point of the sweep ran: "
                    + str(df["error"].dropna().iloc[0] if df["error"].notna().any() else "")}
        best = good.loc[good["gflops"].astype(float).idxmax()]
        say(f"{s.name}: sweep of {len(df)} points in {sweep_s:.0f} s, best "
            f"{best['gflops']:.1f} GFLOP/s")
        t0 = time.perf_counter()
        res = tune(base, sweep_s * share, axes=axes, cache_dir=f"{tmp}/tune",
                   progress=False)
        tune_s = time.perf_counter() - t0
    axes = list(s.axes)
    out = {"setting": s.name, "says": s.says, "grid": len(grid), "valid": len(df),
           "sweep_s": sweep_s, "tune_s": tune_s, "time_share": tune_s / sweep_s,
           "sweep_best": {a: best[a] for a in axes}, "sweep_best_gflops": float(best["gflops"]),
           "tune_choice": None, "tune_measured": int(res.table["measured_step_s"].notna().sum()),
           "messages": res.messages, "candidates": res.table.to_dict("records"),
           "codelet_errors": res.codelet_errors().head(8).to_dict("records"),
           "sweep": df[[*axes, "status", "gflops", "step_time_s", "step_time_min_s",
                        "step_time_max_s", "error"]].to_dict("records")}
    if res.best is None:
        return out | {"error": "tune measured no point"}
    choice = {a: getattr(res.best, a) for a in axes}
    same = good
    for a, v in choice.items():
        same = same[same[a] == v]
    chosen = float(same["gflops"].iloc[0]) if len(same) else float("nan")
    out |= {"tune_choice": choice, "tune_gflops": res.gflops,
            "choice_sweep_gflops": chosen, "ratio": chosen / float(best["gflops"]),
            "met": chosen / float(best["gflops"]) >= TARGET and tune_s / sweep_s <= share}
    say(f"{s.name}: tune chose {choice} in {tune_s:.0f} s ({tune_s / sweep_s:.0%} of the "
        f"sweep): {chosen:.1f} GFLOP/s in the sweep = {out['ratio']:.3f} of the best")
    return out


@contextlib.contextmanager
def _models_apart(folder: str):
    """StarPU's per-codelet models of the points run inside go to ``folder``, not to those
    ``tune`` starts from (``perfmodels.history``): every runtime calibrates (conf.calibrate
    = 1), so the sweep's points would otherwise hand tune every candidate's task times
    before it measured any. The bus calibration is copied (not measured again)."""
    bus = perfmodels.model_dir().parents[1] / "bus"
    if bus.is_dir():
        shutil.copytree(bus, Path(folder) / "bus")
    saved = os.environ.get("STARPU_PERF_MODEL_DIR")
    os.environ["STARPU_PERF_MODEL_DIR"] = folder     # read by each point's process
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("STARPU_PERF_MODEL_DIR", None)
        else:
            os.environ["STARPU_PERF_MODEL_DIR"] = saved


def run(names=None, share: float = SHARE, progress=None, smoke: bool = False) -> dict:
    """Every setting (or those in ``names``): one row each."""
    rows = [run_setting(s, share, progress) for s in settings(names, smoke)]
    return {"share": share, "target": TARGET, "rows": rows,
            "met": all(r.get("met") for r in rows)}


def table(res: dict) -> str:
    """The markdown table BENCHMARKS.md records."""
    lines = ["| setting | grid | sweep s | sweep best GFLOP/s (tiling) | tune s (share) | "
             "tune's choice | its GFLOP/s in the sweep | ratio | measured by tune | met |",
             "|" + "---|" * 10]
    for r in res["rows"]:
        if "error" in r and r.get("tune_choice") is None:
            lines.append(f"| {r['setting']} | {r.get('grid', '—')} | failed: {r['error']} |"
                         + " |" * 7)
            continue
        lines.append(
            f"| {r['setting']} | {r['grid']} | {r['sweep_s']:.0f} | "
            f"{r['sweep_best_gflops']:.1f} ({_tiles(r['sweep_best'])}) | {r['tune_s']:.0f} "
            f"({r['time_share']:.0%}) | {_tiles(r['tune_choice'])} | "
            f"{r['choice_sweep_gflops']:.1f} | {r['ratio']:.3f} | {r['tune_measured']} | "
            f"{'yes' if r['met'] else 'no'} |")
    return "\n".join(lines)


def _tiles(d: dict | None) -> str:
    return "—" if not d else ", ".join(f"{k.replace('_tile', '')} {v}" for k, v in d.items())


def write(res: dict, out) -> dict:
    """bench_tune.md (the table) and bench_tune.json (the record) in ``out``."""
    out = Path(out)
    paths = {"md": out / "bench_tune.md", "json": out / "bench_tune.json"}
    atomic_write_bytes(paths["md"], (table(res) + "\n").encode())
    save_record(paths["json"], "bench-tune", None, res)
    return {k: str(v) for k, v in paths.items()}
