"""Numbers from a trace: throughput, utilisation, idle gaps, the task graph and its
critical path.

``task_graph(tr)``      dependency edges (src, dst, kind RAW/WAR/WAW, handle) rebuilt
                        from each task's data accesses in submission order, the way
                        StarPU's sequential consistency orders them; RW|COMMUTE
                        accesses in a row do not depend on each other.
``critical_path(tr)``   the longest chain of dependent tasks, weighted by measured
                        durations, against the makespan.
``utilisation(tr)``     per worker: busy time / makespan.
``idle_gaps(tr)``       per worker: the gaps between its tasks inside the makespan.
``busy_over_time(tr)``  busy workers averaged over time bins.
``op_times(tr)``        per op: tasks, total and mean time, flops, GFLOP/s.
``transfers_per_bus(tr)``  per bus (one direction between two memory nodes, e.g.
                        RAM → device): bytes, transfers, mean size.
``memory_per_node(tr)`` per memory node: its kind, peak bytes held, capacity, capped.
``summary(tr, tokens=, peak_gflops=)``  all of it in one JSON-ready dict: GFLOP/s,
                        tokens/s, MFU against the sgemm peak, critical path, LP bound.

GFLOP/s counts the tasks' own flop formulas (the codelet table); the makespan runs
from the first task start to the last task end.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nntile_lab.sgemm_peak import check_peak
from nntile_lab.trace.tables import bus_transfers, node_kind, node_timeline, peak_used

MODE_R, MODE_W, MODE_REDUX, MODE_COMMUTE = 1, 2, 8, 16


def makespan_us(tr) -> float:
    t = tr.tasks
    return float(t["end_us"].max() - t["start_us"].min()) if len(t) else 0.0


def gflops(tr) -> float:
    span = makespan_us(tr)
    return float(tr.tasks["flops"].sum()) / span / 1e3 if span > 0 else 0.0


def task_graph(tr) -> pd.DataFrame:
    """Edges src → dst: dst must wait for src (src submitted first)."""
    acc = tr.accesses.sort_values("task_id", kind="stable")
    edges: list[tuple[int, int, str, int]] = []
    state: dict[int, list] = {}   # handle → [writers, readers, commute base or None]
    for task, handle, mode in zip(acc["task_id"].to_numpy(), acc["handle"].to_numpy(),
                                  acc["mode"].to_numpy()):
        task, handle, mode = int(task), int(handle), int(mode)
        writers, readers, base = state.setdefault(handle, [[], [], None])
        writes = bool(mode & (MODE_W | MODE_REDUX))
        if writes and mode & MODE_COMMUTE:
            if base is None:          # a commuting group starts: it waits for what came before
                base = (writers, readers)
                state[handle] = [[], [], base]
            dep_w, dep_r = base
            edges += [(w, task, "RAW", handle) for w in dep_w if mode & MODE_R]
            edges += [(r, task, "WAR", handle) for r in dep_r]
            if not dep_r and not mode & MODE_R:
                edges += [(w, task, "WAW", handle) for w in dep_w]
            state[handle][0].append(task)
            continue
        if mode & MODE_R:
            edges += [(w, task, "RAW", handle) for w in writers]
        if writes:
            edges += [(r, task, "WAR", handle) for r in readers]
            if not readers and not mode & MODE_R:
                edges += [(w, task, "WAW", handle) for w in writers]
            state[handle] = [[task], [], None]
        else:
            state[handle] = [writers, readers + [task], None]
    df = pd.DataFrame(edges, columns=["src", "dst", "kind", "handle"])
    return df[df["src"] != df["dst"]].drop_duplicates(["src", "dst", "kind"]).reset_index(
        drop=True)


def critical_path(tr, edges: pd.DataFrame | None = None) -> dict:
    """Longest path through the task graph with measured durations. ``length_us`` ≤
    ``makespan_us`` always (a chain runs in order); their ratio says how much of the
    run the dependencies alone force."""
    t = tr.tasks
    if not len(t):
        return {"length_us": 0.0, "makespan_us": 0.0, "ratio": math.nan, "tasks": [],
                "longest_task_us": 0.0}
    edges = task_graph(tr) if edges is None else edges
    ids = t["task_id"].to_numpy()
    order = np.argsort(ids)
    ids, dur = ids[order], t["duration_us"].to_numpy()[order]
    pos = {int(i): k for k, i in enumerate(ids)}
    preds: list[list[int]] = [[] for _ in ids]
    for s, d in zip(edges["src"].to_numpy(), edges["dst"].to_numpy()):
        if int(s) in pos and int(d) in pos:
            preds[pos[int(d)]].append(pos[int(s)])
    finish, via = np.zeros(len(ids)), np.full(len(ids), -1)
    for k in range(len(ids)):        # submission order is a topological order
        best = max(preds[k], key=lambda p: finish[p], default=-1)
        finish[k] = dur[k] + (finish[best] if best >= 0 else 0.0)
        via[k] = best
    k, path = int(np.argmax(finish)), []
    while k >= 0:
        path.append(int(ids[k]))
        k = int(via[k])
    span = makespan_us(tr)
    return {"length_us": float(finish.max()), "makespan_us": span,
            "ratio": float(finish.max()) / span if span > 0 else math.nan,
            "tasks": path[::-1], "longest_task_us": float(dur.max())}


def utilisation(tr) -> pd.DataFrame:
    """Per worker: tasks, busy time and busy / makespan."""
    t, span = tr.tasks, makespan_us(tr)
    workers = sorted(set(t["worker"]) | set(tr.workers.get("worker", [])))
    busy = t.groupby("worker")["duration_us"].sum()
    count = t.groupby("worker").size()
    rows = [{"worker": int(w), "tasks": int(count.get(w, 0)), "busy_us": float(busy.get(w, 0.0)),
             "utilisation": float(busy.get(w, 0.0)) / span if span > 0 else 0.0}
            for w in workers]
    return pd.DataFrame(rows, columns=["worker", "tasks", "busy_us", "utilisation"])


def idle_gaps(tr, min_us: float = 0.0) -> pd.DataFrame:
    """Each worker's idle intervals inside [first start, last end] longer than ``min_us``."""
    t = tr.tasks
    cols = ["worker", "start_us", "end_us", "gap_us"]
    if not len(t):
        return pd.DataFrame(columns=cols)
    lo, hi = t["start_us"].min(), t["end_us"].max()
    rows = []
    for w, mine in t.sort_values("start_us").groupby("worker"):
        starts = np.append(mine["start_us"].to_numpy(), hi)
        ends = np.insert(np.maximum.accumulate(mine["end_us"].to_numpy()), 0, lo)
        for a, b in zip(ends, starts):
            if b - a > min_us:
                rows.append((int(w), float(a), float(b), float(b - a)))
    return pd.DataFrame(rows, columns=cols)


def busy_over_time(tr, bins: int = 200, window: tuple[float, float] | None = None):
    """(bin edges µs, busy workers per bin: mean number executing in each bin)."""
    t = tr.tasks
    lo, hi = window or (float(t["start_us"].min()), float(t["end_us"].max()))
    edges = np.linspace(lo, hi, bins + 1)
    busy = np.zeros(bins)
    s, e = t["start_us"].to_numpy(), t["end_us"].to_numpy()
    for k in range(bins):       # overlap of every task with bin k
        busy[k] = np.clip(np.minimum(e, edges[k + 1]) - np.maximum(s, edges[k]), 0, None).sum()
    return edges, busy / np.diff(edges)


def op_times(tr) -> pd.DataFrame:
    """Per op: tasks, total_us, mean_us, flops, gflops (while running); slowest first."""
    g = tr.tasks.groupby("name")
    out = pd.DataFrame({"tasks": g.size(), "total_us": g["duration_us"].sum(),
                        "mean_us": g["duration_us"].mean(), "flops": g["flops"].sum()})
    out["gflops"] = out["flops"] / out["total_us"].where(out["total_us"] > 0) / 1e3
    return out.sort_values("total_us", ascending=False).reset_index()


def summary(tr, tokens: int | None = None, peak_gflops: float | None = None) -> dict:
    """JSON-ready overview. ``tokens``: tokens processed in the trace (default: the sum
    over marked steps); ``peak_gflops``: the machine's sgemm rate, for MFU."""
    peak_gflops = check_peak(peak_gflops)
    span = makespan_us(tr)
    if tokens is None and len(tr.steps) and tr.steps["tokens"].notna().any():
        tokens = int(tr.steps["tokens"].fillna(0).sum())
    rate = gflops(tr)
    cp = critical_path(tr)
    util = utilisation(tr)
    out = {"tasks": len(tr.tasks), "makespan_s": span * 1e-6, "trace_s": tr.duration_us * 1e-6,
           "flops": float(tr.tasks["flops"].sum()), "gflops": rate,
           "tokens": tokens, "tokens_per_s": tokens / (span * 1e-6) if tokens and span else None,
           "peak_gflops": peak_gflops,
           "mfu": rate / peak_gflops if peak_gflops else None,
           "critical_path_s": cp["length_us"] * 1e-6, "critical_path_ratio": cp["ratio"],
           "longest_task_s": cp["longest_task_us"] * 1e-6,
           "utilisation_mean": float(util["utilisation"].mean()) if len(util) else 0.0,
           "utilisation": dict(zip(util["worker"].astype(str), util["utilisation"])),
           "lp_bound_s": tr.bound["bound_us"] * 1e-6 if tr.bound.get("bound_us") else None,
           "lp_bound_note": tr.bound.get("note"),
           "memory_peak_bytes": int(peak_used(tr.memory)), "memory_by_category": tr.categories()}
    if len(tr.workers):
        out["workers"] = tr.workers.to_dict("records")
    out["bus_bytes"] = int(tr.buses["bytes"].sum()) if len(tr.buses) else 0
    out["transfers_per_bus"] = transfers_per_bus(tr).to_dict("records")
    out["memory_per_node"] = memory_per_node(tr).to_dict("records")
    return out


def transfers_per_bus(tr) -> pd.DataFrame:
    """Data moved per bus, each direction between two memory nodes its own row: src, dst,
    direction ("RAM → device", "device → RAM", "RAM → disk", ...), bytes, transfers,
    mean_bytes, time_us (StarPU's bus counters over the trace)."""
    return bus_transfers(tr.buses)


def memory_per_node(tr) -> pd.DataFrame:
    """Per memory node: name, kind, the peak of what StarPU held there during the trace,
    its capacity and whether that was a cap the runtime set."""
    peaks = node_timeline(tr.memory).max()
    nodes = getattr(tr, "nodes", None)
    known = {} if nodes is None or nodes.empty else nodes.set_index("name").to_dict("index")
    rows = [{"name": name, "kind": node_kind(name), "peak_bytes": int(peak),
             "capacity_bytes": known.get(name, {}).get("capacity_bytes"),
             "capped": bool(known.get(name, {}).get("capped", False))}
            for name, peak in peaks.items()]
    return pd.DataFrame(rows, columns=["name", "kind", "peak_bytes", "capacity_bytes", "capped"])

