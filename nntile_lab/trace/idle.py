"""Where the workers' time in the marked steps goes, from a trace's task times.

Per worker, the time between one task's end and its next task's start is split at the
moment that next task became ready (``ready_us``: dependencies met, pushed to the
scheduler):

  kernel      Σ task durations (the codelets running);
  overhead    the part of each gap after the next task was ready: the runtime choosing
              it, acquiring its data (disk reads out of core), running callbacks —
              worker time not executing kernels although work was there;
  waiting     the part before it was ready: nothing for this worker to run yet.

Both-idle intervals (no worker executes a task) are listed apart, each attributed to the
first task that starts after it:

  submission  that task was submitted after the interval began: Python had not yet
              submitted it (a step's start, the gradient-norm read that clipping needs,
              any synchronisation), so Python is why both workers waited;
  runtime     it was already submitted: its dependencies, its data or the scheduler.

``breakdown(tr)`` sums over the marked steps (each step's window runs from the
previous mark, or the trace start, to its mark); shares are of workers × window time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

GAP_COLUMNS = ["step", "start_us", "end_us", "gap_us", "cause", "next_task"]


def step_windows(tr) -> list[tuple[int, float, float]]:
    steps = tr.steps
    if not len(steps):
        t = tr.tasks
        return [(0, float(t["start_us"].min()), float(t["end_us"].max()))] if len(t) else []
    return [(int(r.step), float(r.start_us), float(r.end_us)) for r in steps.itertuples()]


def worker_split(tr) -> dict:
    """Kernel, overhead and waiting µs summed over workers and marked steps."""
    t = tr.tasks
    wins = step_windows(tr)
    workers = sorted(set(t["worker"]) | set(tr.workers.get("worker", [])))
    out = {"kernel_us": 0.0, "overhead_us": 0.0, "waiting_us": 0.0,
           "window_us": sum(b - a for _, a, b in wins) * max(len(workers), 1)}
    for _, a, b in wins:
        for w in workers:
            mine = t[(t["worker"] == w) & (t["end_us"] > a) & (t["start_us"] < b)]
            mine = mine.sort_values("start_us")
            s = np.clip(mine["start_us"].to_numpy(), a, b)
            e = np.clip(mine["end_us"].to_numpy(), a, b)
            ready = mine["ready_us"].to_numpy()
            out["kernel_us"] += float((e - s).sum())
            prev_end = np.concatenate([[a], np.maximum.accumulate(e)[:-1]]) if len(e) else []
            gap = np.clip(s - prev_end, 0, None)
            wait = np.clip(np.minimum(ready, s) - prev_end, 0, None)
            wait = np.minimum(wait, gap)
            out["overhead_us"] += float((gap - wait).sum())
            tail = b - (e.max() if len(e) else a)
            out["waiting_us"] += float(wait.sum()) + max(tail, 0.0)
    return out


def both_idle(tr, min_us: float = 0.0) -> pd.DataFrame:
    """Intervals inside the marked steps where no worker executes a task, with their
    cause (see the module docstring) and the next task's op name."""
    t = tr.tasks.sort_values("start_us")
    rows = []
    for step, a, b in step_windows(tr):
        mine = t[(t["end_us"] > a) & (t["start_us"] < b)]
        s, e = mine["start_us"].to_numpy(), mine["end_us"].to_numpy()
        covered_to = a
        for k in range(len(s) + 1):
            start = b if k == len(s) else max(s[k], a)
            if start - covered_to > min_us:
                if k == len(s):
                    cause, name = "submission", ""   # the step's end: Python's turn
                else:
                    row = mine.iloc[k]
                    cause = "submission" if row["submit_us"] > covered_to else "runtime"
                    name = row["name"]
                rows.append((step, covered_to, start, start - covered_to, cause, name))
            if k < len(s):
                covered_to = max(covered_to, min(e[k], b))
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def breakdown(tr, min_gap_us: float = 0.0) -> dict:
    """JSON-ready: the worker split as shares of workers × step time, and both-idle time
    as a share of step time, by cause."""
    split = worker_split(tr)
    gaps = both_idle(tr, min_gap_us)
    window = split["window_us"] or 1.0
    step_us = sum(b - a for _, a, b in step_windows(tr)) or 1.0
    by_cause = gaps.groupby("cause")["gap_us"].sum() if len(gaps) else pd.Series(dtype=float)
    return {"kernel_share": split["kernel_us"] / window,
            "overhead_share": split["overhead_us"] / window,
            "waiting_share": split["waiting_us"] / window,
            "both_idle_share": float(gaps["gap_us"].sum()) / step_us if len(gaps) else 0.0,
            "both_idle_submission_share": float(by_cause.get("submission", 0.0)) / step_us,
            "both_idle_runtime_share": float(by_cause.get("runtime", 0.0)) / step_us,
            "both_idle_gaps": int(len(gaps)),
            "longest_both_idle_us": float(gaps["gap_us"].max()) if len(gaps) else 0.0}
