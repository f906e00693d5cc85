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


# ---------------------------------------------------------------- MPI ranks
# mpirun stands between the parent and its ranks, so a rank's parent is mpirun, not the
# process that set NNTILE_LAB_PARENT_PID. The chain: mpirun is SIGKILLed when its parent
# exits (``launcher_preexec``, set in the forked child before exec; PR_SET_PDEATHSIG
# survives exec), and each rank is SIGKILLed when mpirun exits (``die_with_launcher``).
# A SIGKILLed mpirun forwards nothing, hence the second link.


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def launcher_preexec():
    """``preexec_fn`` for the mpirun that ``child_env``'s process starts: mpirun is killed
    when its parent exits. None off Linux (no such guarantee there)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = _libc()   # loaded here: between fork and exec only the call itself runs
    parent = os.getpid()

    def preexec():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:   # the parent died before prctl took effect
            os._exit(1)
    return preexec


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_launcher() -> None:
    """In an MPI rank started (by mpirun) from a ``child_env`` process: be killed when
    mpirun exits, and exit at once if that process is already gone (mpirun, killed with it,
    may have died before this rank's prctl). A no-op where not started so or not on Linux."""
    root = os.environ.get(PARENT_ENV)   # every rank reads it: kept in the environment
    if not root or not sys.platform.startswith("linux"):
        return
    if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if os.getppid() == 1 or not _alive(int(root)):
        os._exit(1)
