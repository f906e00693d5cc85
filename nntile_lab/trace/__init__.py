"""See inside a run: per-task traces, memory, throughput, figures.

    from nntile_lab.trace import Trace, metrics, viz, write_chrome
    with Trace(rt) as tr:                 # or tr = Trace(rt).start(); ...; tr.stop()
        for step in range(3):
            model.forward_backward(ids, labels); opt.step()
            tr.mark_step(tokens=ids.size)
        tr.memory_by_category(model, opt)  # while the model lives
    tr.tasks                              # pandas: name, worker, submit_us, start_us, ...
    metrics.summary(tr, peak_gflops=nntile_lab.peak.peak_gflops())
    viz.gantt(tr, step=2).savefig("gantt.png"); viz.save_all(tr, "out/")
    write_chrome(tr, "trace.json")        # Perfetto

Modules: ``records`` (Trace and its tables), ``metrics``, ``viz``, ``chrome``,
``overhead`` (what tracing costs), ``cli`` (``nntile-lab trace`` and ``peak``).
"""
from nntile_lab.trace import metrics
from nntile_lab.trace.chrome import to_chrome, write_chrome
from nntile_lab.trace.records import Trace

__all__ = ["Trace", "metrics", "to_chrome", "write_chrome"]
