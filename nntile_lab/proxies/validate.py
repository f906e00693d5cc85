"""The α-β extrapolation checked against measurement on real network hosts.

On the cluster of network-namespace hosts (``scripts/cluster.sh``; ``scripts/cluster_bench.py``
runs the whole check) the collectives are measured on **2 hosts** and fitted
(:func:`fitted_link`: α and β per operation, ``collectives.fit``); from that fit alone this
module predicts the iteration time on N hosts of

- the **GPT-2 proxy** (data-parallel, one rank per host): ``extrapolate.simulate`` of its
  program, every message timed by its operation's fitted α-β at the group's size;
- the **StarPU-MPI training step** (``train --layout data``): :func:`predict_step` — the step
  moves, per host, the bytes StarPU-MPI counted for that layout on N ranks (a short run of N
  local ranks gives them: the volume is the layout's, not the link's), the busiest host's
  link carries them at the fitted p2p α-β, and the compute of the single process (one CPU
  worker) is shared by the ranks on this machine's cores.

The predictions are set beside the iteration times measured on N hosts (:func:`plot`,
:func:`table`), at each link setting.
"""
from __future__ import annotations

import csv
import statistics

import pandas as pd

from nntile_lab.proxies.collectives import fit, save_figure
from nntile_lab.proxies.extrapolate import FittedLink


def fitted_link(name: str, rows: list, *, per_op: bool = False,
                capacity_bytes_s: float | None = None) -> FittedLink:
    """The α-β of collectives measured on 2 hosts (``collectives.run`` rows; see
    ``extrapolate.FittedLink`` for ``per_op`` and ``capacity_bytes_s``)."""
    ranks = {r["ranks"] for r in rows}
    if ranks != {2}:
        raise ValueError(f"the fit is made on 2 hosts; these rows have {sorted(ranks)} ranks")
    return FittedLink(name, fit(rows), per_op, capacity_bytes_s)


def link_loads(comm: pd.DataFrame, phase: str = "train", by: str = "host") -> dict:
    """{host: (bytes sent, bytes received) per step over other hosts} from a run's
    ``comm.csv`` (``parallel.traffic``): the median over the steps of ``phase`` after the
    first (which also brings what later steps find in place). ``by="rank"``: per rank
    instead (a run of N local ranks standing for N hosts of one rank each)."""
    src, dst = ("src_host", "dst_host") if by == "host" else ("src_rank", "dst_rank")
    first = comm["step"].min()
    df = comm[(comm["phase"] == phase) & (comm[src] != comm[dst])
              & ((comm["step"] > first) | (comm["step"].nunique() == 1))]
    out = df.groupby(["step", src])["bytes"].sum().groupby(src).median()
    inn = df.groupby(["step", dst])["bytes"].sum().groupby(dst).median()
    keys = sorted(set(out.index) | set(inn.index))
    return {k: (float(out.get(k, 0.0)), float(inn.get(k, 0.0))) for k in keys}


def predict_step(loads: dict, link: FittedLink, compute_s: float, ranks: int,
                 cores: int) -> dict:
    """The StarPU-MPI step on ``ranks`` hosts of one rank each.

    Communication: the busiest host's link, carrying the bytes it sends and those it receives
    **one after the other** — in the data layout the weights go out from their owners before
    the others' activations come back for the weight gradients, so the two directions of a
    link barely overlap in time — at the fitted p2p α-β; and at least all hosts' bytes over
    the capacity of the bridge (``link.capacity_bytes_s``, when measured). Compute: the single
    process's step (one CPU worker) shared by the ranks on ``min(ranks, cores)`` cores."""
    if not loads:
        raise ValueError("no bytes crossed between hosts: the run had every rank on one host")
    host = max(loads, key=lambda h: sum(loads[h]))
    busiest = sum(loads[host])
    comm = link.time("p2p", busiest, 2)
    total = sum(sent for sent, _ in loads.values())
    if link.capacity_bytes_s:
        comm = max(comm, total / link.capacity_bytes_s)
    compute = compute_s / min(ranks, cores)
    return {"step_s": compute + comm, "comm_s": comm, "compute_s": compute,
            "busiest_host": host, "busiest_bytes": busiest, "total_bytes": total}


def step_time(log_csv, skip: int = 1) -> float:
    """Median wall time of a training step from a run's ``log.csv`` (``time_s`` differences),
    the first ``skip`` steps left out (start-up: connections, first transfers)."""
    with open(log_csv) as f:
        times = [float(r["time_s"]) for r in csv.DictReader(f) if r.get("time_s")]
    steps = [b - a for a, b in zip(times, times[1:])][max(0, skip - 1):]
    if not steps:
        raise ValueError(f"{log_csv}: too few steps to time (need {skip + 2} or more)")
    return statistics.median(steps)


def error(predicted: float, measured: float) -> float:
    """Relative error of a prediction: (predicted − measured) / measured."""
    return (predicted - measured) / measured


def points(results: dict, key: str = "points") -> pd.DataFrame:
    """One row per (link, what, hosts) of a ``cluster_bench`` results object: its host-count
    series (``points``) or the four models on 4 hosts (``four``)."""
    rows = []
    for setting in results["settings"]:
        for p in setting.get(key, []):
            rows.append({"link": setting["name"], **p,
                         "error": error(p["predicted_s"], p["measured_s"])})
    return pd.DataFrame(rows)


def table(results: dict, key: str = "points") -> str:
    """The points (or ``key="four"``: the four models) as a Markdown table (BENCHMARKS.md)."""
    df = points(results, key)
    lines = ["| link | what | hosts | measured s | predicted s | error |",
             "|---|---|---:|---:|---:|---:|"]
    for r in df.itertuples():
        lines.append(f"| {r.link} | {r.what} | {r.hosts} | {r.measured_s:.3f} | "
                     f"{r.predicted_s:.3f} | {r.error:+.0%} |")
    return "\n".join(lines)


def plot(results: dict, path: str | None = None):
    """Measured (markers) and predicted (lines) iteration time against hosts, one panel per
    workload, one colour per link setting; the fitted hosts (2) are marked."""
    # heavy: only a plot loads pyplot; the backend stays the process's (the CLI picks Agg)
    import matplotlib.pyplot as plt
    df, four = points(results), points(results, "four")
    whats = list(dict.fromkeys(df["what"]))
    panels = len(whats) + (not four.empty)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4), squeeze=False)
    if not four.empty:
        _four_panel(axes[0][-1], four)
    for ax, what in zip(axes[0], whats):
        for i, link in enumerate(dict.fromkeys(df["link"])):
            d = df[(df["what"] == what) & (df["link"] == link)].sort_values("hosts")
            ax.plot(d["hosts"], d["predicted_s"], "-", color=f"C{i}",
                    label=f"{link}: α-β from 2 hosts")
            ax.plot(d["hosts"], d["measured_s"], "o", color=f"C{i}", label=f"{link}: measured")
            for r in d.itertuples():
                ax.annotate(f"{r.error:+.0%}", (r.hosts, r.measured_s), fontsize=8,
                            textcoords="offset points", xytext=(4, -10))
        ax.set(xlabel="hosts (one rank each)", ylabel="seconds per iteration", title=what,
               xticks=sorted(set(df["hosts"])))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle("predicted (α-β fitted on 2 hosts) vs measured, network-namespace hosts",
                 fontsize=10)
    fig.tight_layout()
    if path:
        save_figure(fig, path)
    return fig


def _four_panel(ax, four: pd.DataFrame) -> None:
    """dnn-distributed's four models on 4 hosts: measured (solid) and predicted (hatched)
    bars per link setting, the error above each pair."""
    models = list(dict.fromkeys(four["what"]))
    links = list(dict.fromkeys(four["link"]))
    width = 0.8 / (2 * len(links))
    for i, link in enumerate(links):
        d = four[four["link"] == link].set_index("what").reindex(models)
        x = [m + (2 * i) * width - 0.4 + width / 2 for m in range(len(models))]
        ax.bar(x, d["measured_s"], width, color=f"C{i}", label=f"{link}: measured")
        ax.bar([v + width for v in x], d["predicted_s"], width, color=f"C{i}", alpha=0.45,
               hatch="//", label=f"{link}: predicted")
        for xv, r in zip(x, d.itertuples()):
            ax.annotate(f"{r.error:+.0%}", (xv + width / 2, max(r.measured_s, r.predicted_s)),
                        fontsize=7, ha="center", textcoords="offset points", xytext=(0, 2))
    ax.set_xticks(range(len(models)), [m.replace(", ", "\n") for m in models], fontsize=7)
    ax.set(yscale="log", ylabel="seconds per iteration", title="four proxies on 4 hosts")
    ax.legend(fontsize=7)
