"""Ctrl-C (SIGINT, Jupyter's "interrupt kernel"): sections it must not cut, long actions
it must stop whichever thread runs them, and the one line it ends with.

- ``deferred_interrupts()``: Python raises KeyboardInterrupt between any two bytecodes; a
  few sequences (shutting StarPU down and marking the runtime stopped, replacing a
  checkpoint) must run whole or not at all. Inside the block a SIGINT is only noted; it
  is delivered as usual when the block ends.
- ``stoppable()``, ``check_stop()``, ``run_process()``: a long action (a sweep, a figure
  run, training) that a Stop button or a kernel interrupt ends within a second or two,
  also where no KeyboardInterrupt can reach it (a thread other than the main one: see
  "stopping long actions" below).
- ``Interrupted``: the KeyboardInterrupt such an action ends with, shown as one line.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time


@contextlib.contextmanager
def deferred_interrupts():
    """Hold SIGINT back until the block ends (in the main thread; elsewhere Python
    delivers no signals anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            _deliver(previous, caught[0])


def _deliver(handler, frame) -> None:
    """Act on a held SIGINT as ``handler`` (the one in place before) would have."""
    if handler is signal.SIG_IGN or handler is None:
        return
    if handler is signal.SIG_DFL:
        os.kill(os.getpid(), signal.SIGINT)
        return
    handler(signal.SIGINT, frame)


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (Jupyter's "interrupt kernel") that ended a long call, with what was kept.

    Still a KeyboardInterrupt (code that catches those, and the CLI's exit code 130, work as
    before); ``what`` is also its note, so the CLI's one line names it. Jupyter shows it as
    that one line (``_render_traceback_``, IPython's hook) instead of a traceback through
    the library's internals and subprocess."""

    def __init__(self, what: str):
        super().__init__(what)
        self.add_note(what)

    def _render_traceback_(self) -> list[str]:
        return ["Interrupted: " + "; ".join(getattr(self, "__notes__", ()) or [str(self)])]


# ---------------------------------------------------------------- stopping long actions
# Jupyter's "interrupt kernel" is a SIGINT, and Python delivers signals to the main thread
# only. ipykernel 7 runs a widget's callback (a Run button) on its main thread for the
# first click of a fresh kernel and in a subshell thread from the second click on; there
# SIGINT never arrives (the main thread, idle, ignores it). So a long action does not wait
# for a KeyboardInterrupt: it runs under a *stop token* it checks between points, between
# steps and while it waits (for StarPU's tasks: runtime.wait_interruptibly; for a child
# process: run_process). The token is set by a Stop button (``token.request()``) or by a
# SIGINT, whichever thread runs the action (``reach_actions_on_interrupt``); the check
# raises ``Stopped``, a KeyboardInterrupt, in the action's own thread, so every
# ``except KeyboardInterrupt`` path (the sweep's "finished points are cached", the
# trainer's "last checkpoint") works unchanged.

class Stopped(KeyboardInterrupt):
    """A stop request (Stop button, or a kernel interrupt that reached another thread),
    delivered in the action's thread as a KeyboardInterrupt."""


class StopToken:
    """One long action's stop request: ``request(why)`` from any thread; ``check()`` in
    the action's thread raises ``Stopped`` once (like a signal: cleaning up after it — a
    runtime waiting for its tasks — is not stopped again unless asked again)."""

    def __init__(self):
        self._event = threading.Event()
        self._delivered = False
        self.reason = ""

    def request(self, reason: str = "stopped") -> None:
        self.reason = self.reason or reason
        self._delivered = False
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set() and not self._delivered:
            self._delivered = True
            raise Stopped(self.reason)


_local = threading.local()          # the current thread's tokens, innermost last
_active: set[StopToken] = set()     # every running action's token (a SIGINT sets them all)
_active_lock = threading.Lock()


@contextlib.contextmanager
def stoppable(token: StopToken | None = None):
    """Run the block as a long action that a stop request ends: yields its ``StopToken``
    (a fresh one unless given); ``check_stop()`` and the waits in this thread raise
    ``Stopped`` once it is requested. A SIGINT (Jupyter's interrupt) requests every
    running action's stop, from whichever thread runs it (see
    ``reach_actions_on_interrupt``)."""
    token = token if token is not None else StopToken()
    stack = _local.__dict__.setdefault("tokens", [])
    stack.append(token)
    with _active_lock:
        _active.add(token)
    reach_actions_on_interrupt()
    try:
        yield token
    finally:
        stack.remove(token)
        with _active_lock:
            _active.discard(token)


def current_token() -> StopToken | None:
    """The innermost running action's token in this thread (None outside any)."""
    stack = getattr(_local, "tokens", None)
    return stack[-1] if stack else None


def check_stop() -> None:
    """Raise ``Stopped`` if this thread's action was asked to stop (a no-op outside one).
    Call it between points, between steps and in every wait that polls."""
    for token in getattr(_local, "tokens", ()):
        token.check()


def stop_all(reason: str = "interrupted") -> int:
    """Request the stop of every running action (what a SIGINT does); how many."""
    with _active_lock:
        tokens = list(_active)
    for t in tokens:
        t.request(reason)
    return len(tokens)


def _on_sigint(previous):
    def handler(signum, frame):
        stop_all("interrupted")
        if callable(previous):
            previous(signum, frame)
    handler.nl_stops_actions = True
    return handler


def running_kernel():
    """The running ipykernel kernel, or None (a script, a test, another frontend)."""
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    if kernelapp is None or not kernelapp.IPKernelApp.initialized():
        return None
    return getattr(kernelapp.IPKernelApp.instance(), "kernel", None)


def reach_actions_on_interrupt() -> None:
    """Make a SIGINT stop the running actions in every thread, in an ipykernel kernel.

    An idle ipykernel ignores SIGINT (SIG_IGN); while it handles a message (a cell) it
    installs ``default_int_handler`` and puts back what it saved afterwards. So: on the
    main thread inside a message, the handler it will put back becomes one that stops the
    actions; on the main thread outside one, that handler is installed now; from another
    thread, the main thread's event loop installs it at its next turn. Elsewhere (a
    script, the CLI) nothing changes: SIGINT raises KeyboardInterrupt in the main thread,
    where those run their actions."""
    kernel = running_kernel()
    if kernel is None:
        return
    if threading.current_thread() is not threading.main_thread():
        loop = getattr(kernel, "io_loop", None)
        if loop is not None:
            loop.add_callback(reach_actions_on_interrupt)
        return
    current = signal.getsignal(signal.SIGINT)
    if current is signal.default_int_handler and hasattr(kernel, "saved_sigint_handler"):
        saved = kernel.saved_sigint_handler          # inside a message: put back after it
        if not getattr(saved, "nl_stops_actions", False):
            kernel.saved_sigint_handler = _on_sigint(saved)
    elif not getattr(current, "nl_stops_actions", False):
        signal.signal(signal.SIGINT, _on_sigint(current))


# ---------------------------------------------------------------- child processes
POLL_S = 0.1          # how often a wait for a child looks at the stop token
TERMINATE_WAIT_S = 1.0  # SIGTERM, then SIGKILL after this


def interrupted_exit(returncode: int) -> bool:
    """A child that ended because of a SIGINT: killed by it, or Python's/the CLI's exit
    code for it (130). Jupyter's interrupt reaches the kernel's whole process group, so a
    point's child may see it first."""
    return returncode in (-signal.SIGINT, 128 + signal.SIGINT)


def run_process(cmd, *, input: str | None = None, timeout: float | None = None,
                **popen) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, input=..., capture_output=True, text=True, timeout=...,
    **popen)`` that a stop request (``stoppable``) ends within a second or so: the child —
    its whole session with ``start_new_session=True`` — gets SIGTERM (SIGKILL after
    ``TERMINATE_WAIT_S``) and ``Stopped`` is raised; so is it when the child itself died of
    a SIGINT (``interrupted_exit``). ``subprocess.TimeoutExpired`` as ``subprocess.run``
    raises it. Call it from the thread that waits for the child: a child started with
    ``orphans.child_env`` dies when that thread ends (PR_SET_PDEATHSIG follows the
    thread). (Measurements' points run under ``engine.runner``, which writes the child's
    output to a file instead.)"""
    deadline = None if timeout is None else time.monotonic() + timeout
    with subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else None,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **popen) as proc:
        session = bool(popen.get("start_new_session"))
        pending = input
        try:
            while True:
                try:
                    out, err = proc.communicate(pending, timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pending = None       # sent with the first call
                check_stop()
                if deadline is not None and time.monotonic() > deadline:
                    _end(proc, session)
                    raise subprocess.TimeoutExpired(cmd, timeout) from None
        except BaseException:            # Stopped, a KeyboardInterrupt, anything: no orphan
            _end(proc, session)
            raise
    if interrupted_exit(proc.returncode):
        raise Stopped("interrupted")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _end(proc: subprocess.Popen, session: bool) -> None:
    """SIGTERM, then SIGKILL: to the child's session when it has one of its own (mpirun
    and its ranks), else to the child."""
    def send(sig):
        with contextlib.suppress(ProcessLookupError, PermissionError):   # already gone
            if session:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
    if proc.poll() is not None and not session:
        return
    send(signal.SIGTERM)
    try:
        proc.wait(TERMINATE_WAIT_S)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait()
