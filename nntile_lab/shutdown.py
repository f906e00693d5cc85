"""What must happen just before StarPU shuts down: ``Runtime.stop()`` calls every function in
``BEFORE_SHUTDOWN`` after the tasks and tiles are done and before ``starpu_shutdown``.

Why: StarPU 1.3 sometimes aborts inside ``starpu_shutdown`` (docs/reliability.md, "Known
limits"). A point's process (``engine.worker``) writes what it measured here first, so that
an abort there loses no result and the record says where the process died."""
from __future__ import annotations

BEFORE_SHUTDOWN: list = []


def run_hooks() -> None:
    for hook in list(BEFORE_SHUTDOWN):
        hook()
