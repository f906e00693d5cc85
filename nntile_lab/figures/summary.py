"""A generated markdown summary of the figures: the ratios, beside the paper's."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.figures.family import SYSTEMS, TWIN_NAMES, family_name
from nntile_lab.figures.paper import reference_points
from nntile_lab.figures.records import failed, figure_result, record_model
from nntile_lab.plots.common import size_label

# the ratios the summary gives per size: each system against PyTorch in its precision,
# and nntile_lab bf16 against its own fp32
RATIOS = {("nntile_lab", "torch_fp32"): "nntile_lab / PyTorch fp32",
          ("nntile_lab_bf16", "torch_bf16"): "nntile_lab bf16 / PyTorch bf16",
          ("nntile_lab_bf16", "nntile_lab"): "nntile_lab bf16 / fp32"}


def _largest_fitting(df: pd.DataFrame, system: str, n_layer: int) -> float | None:
    ok = df[(df.system == system) & (df.n_layer == n_layer) & (df.status == "ok")]
    return float(ok.params.max()) if len(ok) else None


def paper_ratios() -> list[str]:
    """The paper's NNTile / FSDP tf32 ratio at its smallest model, and how much larger a model
    NNTile trained than FSDP tf32 (largest size that ran), per setup."""
    ref = reference_points()
    lines = []
    for setup, sub in ref.groupby("setup"):
        first = sub[sub.params_b == sub.params_b.min()].set_index("series").tflops
        fit = {s: g[g.tflops > 0].params_b.max() for s, g in sub.groupby("series")}
        lines.append(f"| paper {setup} | {first['NNTile tf32'] / first['PyTorch FSDP tf32']:.2f}"
                     f" | {fit['NNTile tf32'] / fit['PyTorch FSDP tf32']:.1f}× "
                     f"({fit['NNTile tf32']:.1f}B vs {fit['PyTorch FSDP tf32']:.1f}B) |")
    return lines


def summary_markdown(df: pd.DataFrame, records: list[dict]) -> str:
    rec = records[0]
    m, v = rec.get("machine", {}), rec.get("versions", {})
    commit = rec.get("git_commit") or v.get("git_commit")
    cpu = m.get("cpu") or m.get("cpu_model")   # "cpu" names family/model (newer records)
    plan, model = rec["plan"], record_model(rec)
    # GPT-2's summary reads as it did before other models (old folders redraw the same)
    family = (f"GPT-2 family 12·L·E² + V·E (V = {plan['vocab_size']})" if model == "gpt2"
              else f"{family_name(model)} family, L layers of width E, heads of 64 (size: "
              f"all its parameters; V = {plan['vocab_size']}; PyTorch: "
              f"{TWIN_NAMES.get(model, 'none')})")
    title = "" if model == "gpt2" else f": the {family_name(model)} family"
    lines = [f"# The paper's figures at this machine's scale{title}", "",
             f"Measured {rec.get('date')} on {cpu} ({m.get('cores')} cores, ISA "
             f"{', '.join(m.get('isa', []))}); nntile_lab {v.get('nntile_lab')}, StarPU "
             f"{v.get('starpu')}, torch {v.get('torch')}, commit {commit}.",
             f"{family}, batch {plan['batch']} × "
             f"{plan['seq_len']} tokens, median of {plan['measure_steps']} steps after "
             f"{plan['warmup_steps']} warm-up; both systems under one {plan['cap_mb']} MiB cap "
             "(RAM above each run's start); 0 = did not fit (memory); failed = the run "
             "failed for another reason (listed below). " + _torch_modes(records), "",
             "| L | size | " + " | ".join(SYSTEMS.values()) + " | "
             + " | ".join(RATIOS.values()) + " |",
             "|---|---|" + "---|" * (len(SYSTEMS) + len(RATIOS))]
    for (n_layer, params), g in df.groupby(["n_layer", "params"]):
        by = g.set_index("system").gflops
        status = g.set_index("system").status
        cells = [("failed" if failed(status[s]) else f"{by[s]:.1f}") if s in by else "–"
                 for s in SYSTEMS]
        ratios = []
        for a, b in RATIOS:
            x, y = by.get(a, 0.0), by.get(b, 0.0)
            ratios.append(f"{x / y:.2f}" if x > 0 and y > 0 else "–")
        lines.append(f"| {n_layer} | {size_label(params)} | " + " | ".join(cells)
                     + " | " + " | ".join(ratios) + " |")
    lines += ["", "Largest model that ran under the cap:", ""]
    for n_layer in sorted(df.n_layer.unique()):
        sizes = {s: _largest_fitting(df, s, n_layer) for s in SYSTEMS if s in set(df.system)}
        lines.append(f"- {n_layer} layers: " + ", ".join(
            f"{SYSTEMS[s]} {size_label(p) if p else 'none'}" for s, p in sizes.items()))
    bad = df[df.status.map(failed)]
    if len(bad):
        lines += ["", f"**{len(bad)} point(s) failed** for a reason other than memory (not "
                  "a result: fix the cause and run them again):", ""]
        lines += [f"- {SYSTEMS.get(r.system, r.system)}, {r.n_layer} layers, "
                  f"{size_label(r.params)}: {r.status}: {r.error}" for _, r in bad.iterrows()]
    lines += ["", "The paper, for comparison (NNTile / FSDP tf32 throughput at its smallest "
              "model; largest model NNTile trained over FSDP tf32's):", "",
              "| setup | throughput ratio | model size ratio |", "|---|---|---|",
              *paper_ratios(), ""]
    return "\n".join(lines)


def _torch_modes(records: list[dict]) -> str:
    """Which mode the PyTorch points that ran were drawn in (the faster of eager and
    torch.compile under the cap); records written before both were measured name none."""
    results = [figure_result(r) for r in records]
    ran = [x["torch_mode"] for x in results if x.get("torch_mode") and x.get("status") == "ok"]
    if not ran:
        return "PyTorch: eager."
    return (f"PyTorch: the faster of eager and torch.compile that fitted — compiled at "
            f"{ran.count('compiled')} of the {len(ran)} PyTorch points that ran.")


def write_summary(df: pd.DataFrame, records: list[dict], out_dir: Path) -> Path:
    return atomic_write_bytes(Path(out_dir) / "summary.md",
                              summary_markdown(df, records).encode())
