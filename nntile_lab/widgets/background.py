"""A widget's long action (a sweep started by its Run button) in a thread of its own, that
Kernel → Interrupt and the widget's Stop button end within a second or two.

Why a thread: ipykernel 7 runs a button's callback on its main thread for the first click
of a fresh kernel and in a subshell thread from the second click on (JupyterLab sends
widget messages over a subshell). A callback that ran the sweep itself would block that
thread's message loop — the Stop button's click and the plots' own messages would wait
behind it — and in the subshell no SIGINT reaches it. So the callback starts the action
here and returns; the action runs under a stop token (``interrupts.stoppable``) that the
Stop button and the kernel's interrupt (``interrupts.reach_actions_on_interrupt``) set.

While it runs the kernel is shown busy: a "busy" status on IOPub, said again every
``BUSY_EVERY_S`` (any other message the kernel handles meanwhile ends with "idle", and
JupyterLab shows the last status it got), then "idle" at the end.
"""
from __future__ import annotations

import contextlib
import threading
import time

from nntile_lab.interrupts import StopToken, reach_actions_on_interrupt, running_kernel, stoppable

BUSY_EVERY_S = 0.25


class Background:
    """At most one action at a time: ``start(fn)`` runs ``fn()`` in a thread under a fresh
    stop token; ``stop(why)`` asks it to stop; ``wait(timeout)`` joins it."""

    def __init__(self):
        self.thread: threading.Thread | None = None
        self.token: StopToken | None = None
        self.error: BaseException | None = None   # what the last action raised, if anything
        reach_actions_on_interrupt()    # now, on the main thread, while a cell runs

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, fn) -> bool:
        """Start ``fn()`` unless an action runs (False then)."""
        if self.running:
            return False
        self.token, self.error = StopToken(), None
        parent = _parent()
        self.thread = threading.Thread(target=self._main, args=(fn, self.token, parent),
                                       name="nntile_lab widget action", daemon=True)
        self.thread.start()
        return True

    def stop(self, reason: str = "stopped") -> None:
        if self.token is not None:
            self.token.request(reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Join the running action; whether it ended within ``timeout``."""
        if self.thread is not None:
            self.thread.join(timeout)
        return not self.running

    def _main(self, fn, token: StopToken, parent) -> None:
        with kernel_busy(parent), stoppable(token):
            try:
                let_inputs_arrive()
                fn()
            except BaseException as exc:   # noqa: BLE001 — said by the widget, never printed
                self.error = exc


SETTLE_S = 0.05


def let_inputs_arrive() -> None:
    """Wait until the kernel's main thread has handled what the browser sent before the
    click. JupyterLab sends every widget message in order, but ipykernel 7 hands a text
    box's value to its main thread and (from the second click on) the button's click to a
    subshell thread: the click can be handled first, and the action would read the box's
    previous value (seen: a Run after typing 128 over 2.5 still read 2.5). Three turns of
    the main thread's event loop let the queued updates through (at most a second each: a cell
    running there holds them, and then nothing can be waited for)."""
    kernel = running_kernel()
    loop = getattr(kernel, "io_loop", None)
    if loop is None or threading.current_thread() is threading.main_thread():
        return
    time.sleep(SETTLE_S)
    for _ in range(3):
        turned = threading.Event()
        loop.add_callback(turned.set)
        if not turned.wait(1.0):
            return


def _parent():
    """The message being handled (the click), so that the busy status answers it."""
    kernel = running_kernel()
    try:
        return kernel.get_parent() if kernel is not None else None
    except Exception:   # an older ipykernel: no parent, no busy status
        return None


class kernel_busy:
    """Show the kernel busy while the block runs (a no-op outside an ipykernel)."""

    def __init__(self, parent):
        self.kernel, self.parent = running_kernel(), parent
        self._done = threading.Event()
        self._beat: threading.Thread | None = None

    def _say(self, state: str) -> None:
        # a kernel without this (private) method: no busy status, nothing else lost
        with contextlib.suppress(Exception):
            self.kernel._publish_status(state, "shell", self.parent or None)

    def _beating(self) -> None:
        while not self._done.wait(BUSY_EVERY_S):
            self._say("busy")

    def __enter__(self):
        if self.kernel is not None and self.parent:
            self._say("busy")
            self._beat = threading.Thread(target=self._beating, daemon=True,
                                          name="nntile_lab busy status")
            self._beat.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        if self._beat is not None:
            self._beat.join()
            self._say("idle")
        return False


class BackgroundButtons:
    """The Stop button and the waits of a widget whose Run/Generate button starts its action
    in ``self.background`` (a ``Background``)."""

    background: Background

    def stop(self) -> None:
        """The Stop button: the running action ends within a second or two; what it made
        so far (finished sweep points, generated text) is kept."""
        self.background.stop("stopped with the Stop button")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the action a button started (tests, scripts); whether it ended."""
        return self.background.wait(timeout)

    @property
    def running(self) -> bool:
        return self.background.running
