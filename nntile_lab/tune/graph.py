"""A training step as a task graph, and how long it takes on ``W`` workers.

A candidate tiling's step is a list of tasks in submission order (``tune.predict`` records
it with a dry run of the model's very code): each task's codelet, FLOPs, bytes, priority and
the tiles it reads and writes. StarPU orders the tasks on a tile as they were submitted
(a read waits for the last write; a write for the last write and the reads since), so the
graph follows from the accesses alone. ``simulate`` replays the step: Python submits the
tasks one after the other (``submit_us`` apart), a task is ready when its inputs are, and
each free worker takes the ready task of the highest priority (StarPU's lws and the dm*
policies honour priorities). Its makespan is the predicted step; beside it the numbers that
say *why* — the critical path (the longest chain of dependent tasks), the work per worker
and the submission time, three lower bounds of the step.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass
class Graph:
    """Tasks in submission order: ``ops`` (codelet names), ``flops``, ``nbytes``,
    ``priority``, and ``preds[i]`` the tasks task ``i`` waits for."""

    ops: list
    flops: np.ndarray
    nbytes: np.ndarray
    priority: np.ndarray
    preds: list

    def __len__(self) -> int:
        return len(self.ops)


def build(tasks) -> Graph:
    """A ``Graph`` from tasks with ``op``, ``flops``, ``nbytes``, ``priority``, ``reads`` and
    ``writes`` (hashable tile keys; a read-write tile in ``writes``)."""
    last_write: dict = {}
    readers: dict = {}
    preds = []
    for i, t in enumerate(tasks):
        deps = set()
        for key in t.reads:
            w = last_write.get(key)
            if w is not None:
                deps.add(w)
            readers.setdefault(key, []).append(i)
        for key in t.writes:
            w = last_write.get(key)
            if w is not None:
                deps.add(w)
            deps.update(r for r in readers.get(key, ()) if r != i)
            last_write[key] = i
            readers[key] = []
        deps.discard(i)
        preds.append(sorted(deps))
    return Graph([t.op for t in tasks], np.array([t.flops for t in tasks], float),
                 np.array([t.nbytes for t in tasks], float),
                 np.array([t.priority for t in tasks], float), preds)


@dataclass
class Replay:
    """A simulated step (µs): its makespan and the three lower bounds of it."""

    makespan_us: float
    critical_path_us: float
    work_per_worker_us: float
    submission_us: float
    tasks: int

    @property
    def bound(self) -> str:
        """Which lower bound is nearest the makespan: what limits the step."""
        b = {"critical path": self.critical_path_us, "work per worker":
             self.work_per_worker_us, "submission": self.submission_us}
        return max(b, key=b.get)


def critical_path(g: Graph, dur: np.ndarray) -> float:
    finish = np.zeros(len(g))
    for i, ps in enumerate(g.preds):
        finish[i] = dur[i] + (max(finish[p] for p in ps) if ps else 0.0)
    return float(finish.max()) if len(g) else 0.0


def simulate(g: Graph, dur: np.ndarray, workers: int, submit_us: float) -> Replay:
    """List scheduling of ``g`` with task durations ``dur`` (µs) on ``workers`` workers,
    task ``i`` submitted at ``i · submit_us``: an event loop over task ends and arrivals."""
    n = len(g)
    if n == 0:
        return Replay(0.0, 0.0, 0.0, 0.0, 0)
    waiting = np.array([len(ps) for ps in g.preds])
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(g.preds):
        for p in ps:
            succs[p].append(i)
    submitted = np.arange(n) * submit_us
    arriving = [(submitted[i], i) for i in range(n) if waiting[i] == 0]   # inputs done
    heapq.heapify(arriving)
    ready: list = []          # (-priority, submission order): the next task a worker takes
    running: list = []        # (end, i)
    idle, done, now, end = workers, 0, 0.0, 0.0
    while done < n:
        while arriving and arriving[0][0] <= now:
            _, i = heapq.heappop(arriving)
            heapq.heappush(ready, (-g.priority[i], i))
        while idle and ready:
            _, i = heapq.heappop(ready)
            heapq.heappush(running, (now + dur[i], i))
            idle -= 1
        now = min(running[0][0] if running else np.inf, arriving[0][0] if arriving else np.inf)
        while running and running[0][0] <= now:
            t, i = heapq.heappop(running)
            idle, done, end = idle + 1, done + 1, max(end, t)
            for s in succs[i]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    heapq.heappush(arriving, (max(submitted[s], t), s))
    return Replay(end, critical_path(g, dur), float(dur.sum()) / workers, float(n * submit_us),
                  n)
