"""See inside a run: per-task traces, memory, throughput, figures.

    from nntile_lab.trace import Trace, metrics, viz, write_chrome
    with Trace(rt) as tr:                 # or tr = Trace(rt).start(); ...; tr.stop()
        for step in range(3):
            model.forward_backward(ids, labels); opt.step()
            tr.mark_step(tokens=ids.size)
        tr.memory_by_category(model, opt)  # while the model lives
    tr.tasks                              # pandas: name, worker, submit_us, start_us, ...
    metrics.summary(tr, peak_gflops=nntile_lab.sgemm_peak.gflops())
    viz.gantt(tr, step=2).savefig("gantt.png"); viz.save_all(tr, "out/")
    write_chrome(tr, "trace.json")        # Perfetto

Modules: ``recorder`` (Trace and its tables), ``metrics``, ``viz``, ``chrome``,
``training`` (training steps under a Trace), ``overhead`` (what tracing costs), ``cli``
(``nntile-lab trace`` and ``peak``).
"""
from __future__ import annotations

from nntile_lab.trace import metrics
from nntile_lab.trace.chrome import to_chrome, write_chrome

__all__ = ["Trace", "TraceError", "metrics", "to_chrome", "write_chrome"]


def __getattr__(name: str):
    """``Trace`` records a live runtime and needs the compiled extension: it loads on
    first use, so reading and drawing saved traces works without StarPU."""
    if name not in ("Trace", "TraceError"):
        raise AttributeError(f"module 'nntile_lab.trace' has no attribute {name!r}")
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.trace import recorder
    globals()[name] = getattr(recorder, name)
    return globals()[name]
