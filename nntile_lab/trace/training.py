"""Training steps of an ``ExperimentSpec`` under a :class:`Trace` (``nntile-lab trace``,
the sweeps): the runtime, model, optimizer and step are the trainer's (``experiment``)."""
from __future__ import annotations

from nntile_lab.experiment import RandomTokens, build, runtime, step_function, train_split
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace.recorder import Trace


def run_for_trace(spec: ExperimentSpec, steps: int, data=None, warmup_steps: int = 1,
                  profiling: bool = True, bound: bool = False, before_stop=None):
    """``steps`` training steps of ``spec`` under a Trace, after ``warmup_steps`` untraced
    ones. Returns ``(stopped trace, memory by category, tokens per step)``.
    ``data="random"`` draws random tokens instead of reading a dataset. ``before_stop(tr,
    memory)`` runs once the trace is stopped and before the runtime stops (StarPU 1.3 may
    abort in its shutdown: what it keeps survives that)."""
    batches = RandomTokens(spec.vocab_size) if data == "random" else train_split(data)
    tokens = spec.tokens_per_step()
    with runtime(spec, profiling=profiling) as rt:
        model, optimizer, schedule = build(spec)
        step = step_function(spec, rt, model, optimizer, schedule, batches)
        for k in range(warmup_steps):
            step(k)
        tr = Trace(rt, bound=bound).start()
        for k in range(warmup_steps, warmup_steps + steps):
            step(k)
            tr.mark_step(tokens)
        memory = tr.memory_by_category(model, optimizer)
        tr.stop()
        if before_stop is not None:
            before_stop(tr, memory)
    return tr, memory, tokens
