"""Subprocess helpers for the fault tests: every wait has a time limit, so a hang
fails the test instead of stalling CI."""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def spawn(*argv: str) -> subprocess.Popen:
    """``python argv...`` with this checkout importable, stdout/stderr piped. A thread
    moves stdout lines to ``proc.lines`` (a queue; None at the end), so reading them
    can time out."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    proc.lines, proc.err_lines = queue.Queue(), []

    def pump():
        for line in proc.stdout:
            proc.lines.put(line)
        proc.lines.put(None)

    proc.pumps = [threading.Thread(target=pump, daemon=True),
                  threading.Thread(target=lambda: proc.err_lines.extend(proc.stderr),
                                   daemon=True)]
    for t in proc.pumps:
        t.start()
    return proc


def _stderr(proc) -> str:
    for t in proc.pumps:
        t.join(timeout=10)
    return "".join(proc.err_lines)


def read_until(proc: subprocess.Popen, pred, timeout: float) -> tuple[str, list[str]]:
    """Lines of stdout until one satisfies ``pred``; (that line, all lines read). Fails
    (AssertionError, process killed) when none comes within ``timeout`` seconds."""
    lines: list[str] = []
    end = time.monotonic() + timeout
    while True:
        try:
            line = proc.lines.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        if line is None:   # the process ended
            break
        lines.append(line)
        if pred(line):
            return line, lines
    proc.kill()
    proc.wait()
    raise AssertionError(f"no expected line within {timeout} s; stdout: {lines[-5:]}; "
                         f"stderr: {_stderr(proc)[-2000:]}")


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    """(return code, rest of stdout, stderr); a process still running after
    ``timeout`` seconds is killed and the test fails (a hang)."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"process hung ({timeout} s): stderr "
                             f"{_stderr(proc)[-2000:]!r}") from None
    err = _stderr(proc)
    rest = []
    while (line := proc.lines.get(timeout=10)) is not None:
        rest.append(line)
    return proc.returncode, "".join(rest), err
