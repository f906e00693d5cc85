"""No orphan point processes: a child measuring a sweep or figure point dies with its parent.

Sweeps and figure runs measure each point in a child process. If the parent is killed
(``kill -9``, the OOM killer, a closed terminal), nothing would stop the child, which then
runs for up to its time limit, holding cores and memory. The parent passes its pid in
``NNTILE_LAB_PARENT_PID``; the child asks Linux to SIGKILL it when its parent exits
(``prctl(PR_SET_PDEATHSIG)``) and exits at once if the parent is already gone.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "NNTILE_LAB_PARENT_PID"
PR_SET_PDEATHSIG = 1


def child_env(env: dict | None = None) -> dict:
    """The environment for a point's child: ``env`` (default: this one) and this pid."""
    env = dict(os.environ if env is None else env)
    env[PARENT_ENV] = str(os.getpid())
    return env


def die_with_parent() -> None:
    """In a point's child: be killed when the parent that started it exits. A no-op where
    not started by ``child_env`` or not on Linux."""
    parent = os.environ.pop(PARENT_ENV, None)   # not for this child's own children
    if not parent or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if os.getppid() != int(parent):   # the parent died before prctl took effect
        os._exit(1)
