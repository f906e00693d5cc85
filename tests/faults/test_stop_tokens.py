"""Stop tokens (interrupts.stoppable): a long action in any thread ends within a second or
two of a stop request — a Stop button's ``token.request()`` or a SIGINT's ``stop_all()`` —
between points, inside a StarPU wait, and while a child process runs."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from nntile_lab.interrupts import (
    Interrupted,
    Stopped,
    StopToken,
    check_stop,
    interrupted_exit,
    run_process,
    stop_all,
    stoppable,
)
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import grid, run

STOP_S = 2.0      # the promise: stopped within this of the request
BASE = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=3, ncpu=2)


def in_thread(fn):
    """Run ``fn`` in a thread; (thread, box) where box gets "result" or "error"."""
    box = {}

    def main():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 — the test looks at it
            box["error"] = exc
    t = threading.Thread(target=main, daemon=True)
    t.start()
    return t, box


def test_a_token_is_delivered_once_in_its_own_thread_only():
    token = StopToken()
    check_stop()                                  # outside any action: nothing
    with stoppable(token):
        check_stop()
        token.request("stopped with the Stop button")
        with pytest.raises(Stopped, match="Stop button") as info:
            check_stop()
        assert isinstance(info.value, KeyboardInterrupt)
        check_stop()                              # once: clean-up is not stopped again
        token.request("again")                    # asked again: delivered again
        with pytest.raises(Stopped):
            check_stop()
    # another thread's action is not this thread's
    other = StopToken()
    seen = threading.Event()
    go = threading.Event()

    def worker():
        with stoppable(other):
            seen.set()
            go.wait(10)
            check_stop()
    t, box = in_thread(worker)
    assert seen.wait(10)
    with stoppable():
        other.request("theirs")
        check_stop()                              # mine is not requested
    go.set()
    t.join(10)
    assert isinstance(box.get("error"), Stopped)


def test_stop_all_reaches_every_running_action_and_nothing_else():
    started = threading.Barrier(3)

    def action():
        with stoppable():
            started.wait(10)
            for _ in range(200):
                check_stop()
                time.sleep(0.01)
            return "ran to its end"
    threads = [in_thread(action) for _ in range(2)]
    started.wait(10)
    assert stop_all("interrupted") == 2
    for t, box in threads:
        t.join(STOP_S)
        assert not t.is_alive() and isinstance(box.get("error"), Stopped), box
    assert stop_all() == 0                       # none left running: a later action is fresh
    with stoppable():
        check_stop()


def test_run_process_ends_a_child_within_seconds_of_a_stop():
    token = StopToken()
    t, box = in_thread(lambda: _run_under(token, [sys.executable, "-c",
                                                  "import time; time.sleep(60)"]))
    time.sleep(0.5)
    asked = time.monotonic()
    token.request("stopped")
    t.join(STOP_S + 1)
    assert not t.is_alive() and time.monotonic() - asked < STOP_S
    assert isinstance(box.get("error"), Stopped), box
    # a child that ignores SIGTERM is killed after TERMINATE_WAIT_S
    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                "signal.SIG_IGN); print('up', flush=True); time.sleep(60)"]
    token = StopToken()
    t, box = in_thread(lambda: _run_under(token, stubborn))
    time.sleep(1.0)
    asked = time.monotonic()
    token.request("stopped")
    t.join(STOP_S + 2)
    assert not t.is_alive() and time.monotonic() - asked < STOP_S + 0.5
    assert isinstance(box.get("error"), Stopped), box


def _run_under(token, cmd, **popen):
    with stoppable(token):
        return run_process(cmd, timeout=120, **popen)


def test_run_process_ends_a_child_session_with_its_children(tmp_path):
    """mpirun and its ranks (the proxies): with ``start_new_session`` the whole session
    goes, not only the child."""
    pid_file = tmp_path / "grandchild"
    cmd = ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"]
    token = StopToken()
    t, box = in_thread(lambda: _run_under(token, cmd, start_new_session=True))
    end = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < end
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    token.request("stopped")
    t.join(STOP_S + 2)
    assert not t.is_alive() and isinstance(box.get("error"), Stopped), box
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the child's own child {grandchild} outlived the stop")


def test_run_process_is_subprocess_run_otherwise():
    done = run_process([sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1]); "
                        "print('err', file=sys.stderr); sys.exit(3)"], input="abc")
    assert (done.returncode, done.stdout, done.stderr) == (3, "cba\n", "err\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_process([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    # a child ended by SIGINT (Jupyter's interrupt reaches the kernel's process group)
    assert interrupted_exit(-signal.SIGINT) and interrupted_exit(130)
    assert not interrupted_exit(1) and not interrupted_exit(-signal.SIGKILL)
    with pytest.raises(Stopped):
        run_process([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), "
                     "signal.SIGINT)"])


@pytest.mark.parametrize("isolate", [True, False])
def test_a_sweep_in_another_thread_stops_between_or_inside_points(tmp_path, isolate):
    """A sweep where no KeyboardInterrupt can reach it (a thread, as in ipykernel's
    subshell): a stop request after the first point ends it within seconds, keeps the
    finished point cached and caches nothing of the stopped one."""
    token = StopToken()
    first = threading.Event()

    def sweep():
        with stoppable(token):      # a quick point, then one of minutes
            return run(grid(BASE, measure_steps=[3, 20000]), tmp_path, isolate=isolate,
                       progress=False, peak_gflops=1.0, on_point=lambda r: first.set())
    t, box = in_thread(sweep)
    assert first.wait(300), box
    time.sleep(0.3)                 # the next point is running (its process, or its steps)
    asked = time.monotonic()
    token.request("stopped with the Stop button")
    t.join(60)
    assert not t.is_alive()
    took = time.monotonic() - asked
    err = box.get("error")
    assert isinstance(err, Interrupted), box
    assert err._render_traceback_()[0].startswith("Interrupted: sweep stopped after 1 of")
    assert took < STOP_S, took
    assert len(list(tmp_path.glob("*.json"))) == 1      # the finished point only
