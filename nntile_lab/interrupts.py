"""Critical sections that a Ctrl-C (SIGINT, Jupyter's "interrupt kernel") must not cut.

Python raises KeyboardInterrupt between any two bytecodes; a few sequences (shutting
StarPU down and marking the runtime stopped, replacing a checkpoint) must run whole or
not at all. Inside ``deferred_interrupts()`` a SIGINT is only noted; it is delivered
as usual when the block ends.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading


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
