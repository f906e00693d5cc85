"""Training steps of an ``ExperimentSpec`` under a :class:`Trace` (``nntile-lab trace``,
the sweeps): the runtime, model, optimizer and step are the trainer's (``experiment``)."""
from __future__ import annotations

from nntile_lab.experiment import RandomTokens, build, runtime, step_function, train_split
from nntile_lab.spec import ExperimentSpec
from nntile_lab.trace.recorder import Trace


def run_for_trace(spec: ExperimentSpec, steps: int, data=None, warmup_steps: int = 1,
                  profiling: bool = True, bound: bool = False):
    """``steps`` training steps of ``spec`` under a Trace, after ``warmup_steps`` untraced
    ones. Returns ``(stopped trace, memory by category, tokens per step)``.
    ``data="random"`` draws random tokens instead of reading a dataset."""
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
    return tr, memory, tokens
