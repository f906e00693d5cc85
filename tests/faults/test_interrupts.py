"""SIGINT (Jupyter's "interrupt kernel", Ctrl-C) at random moments: KeyboardInterrupt
arrives promptly, no tile stays acquired, the runtime stops, and a new runtime in the
same process computes correctly. Every child process has a time limit."""
import random
import signal
import time

import pytest

from tests.faults._proc import HERE, finish, read_until, spawn

CHILD = str(HERE / "sigint_child.py")
TRIALS = 24


def interrupt(proc, delay: float) -> float:
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    return sent


@pytest.mark.parametrize("restarts", [0, 1], ids=["first-runtime", "later-runtime"])
def test_random_sigint_during_work_recovers(restarts):
    rng = random.Random(restarts)
    for trial in range(TRIALS // 2):
        proc = spawn(CHILD, "loop", str(restarts))
        read_until(proc, lambda line: line.startswith("READY"), timeout=60)
        sent = interrupt(proc, rng.uniform(0.0, 0.4))
        line, _ = read_until(proc, lambda line: line.startswith("INTERRUPTED"), timeout=10)
        code, out, err = finish(proc, timeout=30)
        assert code == 0 and "RECOVERED" in out, f"trial {trial}: {code} {out!r} {err[-2000:]}"
        assert float(line.split()[1]) - sent < 2.0, f"trial {trial}: slow to interrupt"


def test_sigint_interrupts_wait_with_tasks_left():
    """rt.wait() on a queue of seconds of tasks raises KeyboardInterrupt at once (the
    tasks are still queued); stop() then waits for them and a new runtime works."""
    proc = spawn(CHILD, "wait")
    read_until(proc, lambda line: line.startswith("READY"), timeout=60)
    sent = interrupt(proc, 0.2)
    line, _ = read_until(proc, lambda line: line.startswith("INTERRUPTED"), timeout=10)
    _, at, left = line.split()
    assert float(at) - sent < 2.0
    assert int(left) > 0, "the wait was not interrupted: no task was left"
    code, out, err = finish(proc, timeout=60)
    assert code == 0 and "RECOVERED" in out, err[-2000:]
