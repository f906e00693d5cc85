"""A step's task graph from its tiles' accesses, and its replay on W workers against what a
hand count gives: chains, independent tasks, priorities, submission."""
from types import SimpleNamespace as Task

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab.tune.graph import build, critical_path, simulate


def task(reads=(), writes=(), prio=0):
    return Task(op="x", flops=1.0, nbytes=1.0, priority=prio, reads=list(reads),
                writes=list(writes))


def test_dependencies_follow_the_accesses_in_submission_order():
    g = build([task(writes=["a"]), task(reads=["a"], writes=["b"]), task(reads=["a"]),
               task(writes=["a"]), task(reads=["b", "a"])])
    # a read waits for the last write; a write for the last write and the reads since
    assert g.preds == [[], [0], [0], [0, 1, 2], [1, 3]]


def test_replay_of_chains_and_independent_tasks():
    chain = [task(writes=["a"])] + [task(reads=["a"], writes=["a"]) for _ in range(3)]
    free = [task(writes=[f"b{i}"]) for i in range(4)]
    g = build(chain + free)
    dur = np.full(8, 10.0)
    r = simulate(g, dur, 2, 0.0)
    assert (r.makespan_us, r.critical_path_us, r.work_per_worker_us) == (40.0, 40.0, 40.0)
    assert simulate(g, dur, 1, 0.0).makespan_us == 80.0
    assert simulate(g, dur, 8, 0.0).makespan_us == 40.0       # the chain bounds it
    # submission 20 µs apart: the last task is submitted at 140 µs
    slow = simulate(g, dur, 8, 20.0)
    assert slow.makespan_us == 150.0 and slow.bound == "submission"


def test_the_highest_priority_ready_task_runs_first():
    # one worker, a long task and a short one ready at once: priority decides the order
    g = build([task(writes=["a"], prio=0), task(writes=["b"], prio=5),
               task(reads=["b"], writes=["c"], prio=5)])
    dur = np.array([100.0, 1.0, 1.0])
    r = simulate(g, dur, 1, 0.0)
    assert r.makespan_us == 102.0
    assert critical_path(g, dur) == 100.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4))
def test_the_replay_lies_between_its_lower_bounds_and_the_serial_time(seed, workers):
    rng = np.random.default_rng(seed)
    n, keys = int(rng.integers(1, 60)), [f"t{i}" for i in range(8)]
    tasks = [task(reads=rng.choice(keys, int(rng.integers(0, 3)), replace=False),
                  writes=rng.choice(keys, int(rng.integers(1, 3)), replace=False),
                  prio=int(rng.integers(0, 3))) for _ in range(n)]
    g = build(tasks)
    dur = rng.uniform(1, 100, n)
    r = simulate(g, dur, workers, 0.0)
    assert r.makespan_us >= max(r.critical_path_us, r.work_per_worker_us) - 1e-9
    assert r.makespan_us <= dur.sum() + 1e-9
    if workers == 1:
        assert r.makespan_us == pytest.approx(dur.sum())
