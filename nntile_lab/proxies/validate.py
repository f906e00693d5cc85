"""The α-β extrapolation checked against measurement on real network hosts.

On the cluster of network-namespace hosts (``scripts/cluster.sh``; ``scripts/cluster_bench.py``
runs the whole check) the collectives are measured on **2 hosts** and fitted
(:func:`fitted_link`: α and β per operation, ``collectives.fit``); from that fit alone this
module predicts the iteration time on N hosts of

- the **GPT-2 proxy** (data-parallel, one rank per host): ``extrapolate.simulate`` of its
  program, every message timed by its operation's fitted α-β at the group's size;
- the **StarPU-MPI training step** (``train --layout data``): :func:`predict_step` — the step
  moves, per host, the bytes StarPU-MPI counted for that layout on N ranks (a short run of N
  local ranks gives them: the volume is the layout's, not the link's), every host's link
  carries its own traffic in each direction at the fitted p2p bandwidth, the busiest link
  sets the communication time, and the compute of the single process (one CPU worker) is
  shared by the ranks on this machine's cores.

The predictions are set beside the iteration times measured on N hosts (:func:`plot`,
:func:`table`), at each link setting.
"""
from __future__ import annotations

import csv
import statistics

import pandas as pd

from nntile_lab.proxies.collectives import fit, save_figure
from nntile_lab.proxies.extrapolate import FittedLink


def fitted_link(name: str, rows: list) -> FittedLink:
    """The per-operation α-β of collectives measured on 2 hosts (``collectives.run`` rows)."""
    ranks = {r["ranks"] for r in rows}
    if ranks != {2}:
        raise ValueError(f"the fit is made on 2 hosts; these rows have {sorted(ranks)} ranks")
    return FittedLink(name, fit(rows))


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
    """The StarPU-MPI step on ``ranks`` hosts: the busiest link (sent or received, each
    direction a link of its own) at the p2p fit, plus the single process's compute shared by
    ``min(ranks, cores)`` cores."""
    if not loads:
        raise ValueError("no bytes crossed between hosts: the run had every rank on one host")
    host, (sent, received) = max(loads.items(), key=lambda kv: max(kv[1]))
    comm = link.time("p2p", max(sent, received), 2)
    compute = compute_s / min(ranks, cores)
    return {"step_s": compute + comm, "comm_s": comm, "compute_s": compute,
            "busiest_host": host, "busiest_bytes": max(sent, received)}


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


def points(results: dict) -> pd.DataFrame:
    """One row per (link, what, hosts) of a ``cluster_bench`` results object."""
    rows = []
    for setting in results["settings"]:
        for p in setting["points"]:
            rows.append({"link": setting["name"], **p,
                         "error": error(p["predicted_s"], p["measured_s"])})
    return pd.DataFrame(rows)


def table(results: dict) -> str:
    """The points as a Markdown table (BENCHMARKS.md)."""
    df = points(results)
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
    df = points(results)
    whats = list(dict.fromkeys(df["what"]))
    fig, axes = plt.subplots(1, len(whats), figsize=(5.2 * len(whats), 4), squeeze=False)
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
    fig.suptitle("predicted (α-β fitted on 2 hosts) vs measured, namespace hosts", fontsize=10)
    fig.tight_layout()
    if path:
        save_figure(fig, path)
    return fig
