"""What tracing costs: a GPT-2 training step timed with and without a Trace.

``measure()`` runs the same steps on one runtime started without profiling, an
untraced and a traced run side by side in each repeat (the order alternating), so
that drift in a shared machine's load hits both alike; the overhead is the median
of the per-repeat ratios. The traced time covers StarPU's profiling, the per-task C
records and the memory sampler thread (with ``--bound``, the LP bound recording
too); ``stop_s`` (draining the records into tables) is reported apart, since it
runs once after the steps.
``per_task_us()`` measures the cost per task directly on many tiny tasks, where
nothing but submission and bookkeeping takes time.

    nntile-lab bench trace-overhead [--repeats 7] [--steps 3] [--big]
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import nntile_lab as nl
from nntile_lab import experiment
from nntile_lab.spec import DEFAULTS, ExperimentSpec
from nntile_lab.trace.recorder import Trace

# ~1000 tasks a step, tens of µs each: many small tasks, where a per-task cost shows most.
SMALL = ExperimentSpec(n_layer=2, n_head=4, n_embd=128, seq_len=64, vocab_size=512, batch=4,
                       batch_tile=4, seq_tile=32, embd_tile=64, inner_tile=256, head_tile=4,
                       vocab_tile=256)
# The main job's model, batch and tiles (L=4, E=256, T=128, full vocabulary): ms-long tasks.
BIG = DEFAULTS


def measure(spec: ExperimentSpec = SMALL, repeats: int = 7, steps: int = 3,
            bound: bool = False) -> dict:
    """Step times of ``spec``'s model (built as the trainer builds it; runtime from the spec,
    without profiling) untraced and traced, ``repeats`` pairs of ``steps`` steps each."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, spec.vocab_size, (spec.batch, spec.seq_len))
    labels = rng.integers(0, spec.vocab_size, (spec.batch, spec.seq_len))
    plain, traced, stops, tasks = [], [], [], []
    with experiment.runtime(spec) as rt:
        model, opt, _ = experiment.build(spec)

        def run(tr=None) -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                model.forward_backward(ids, labels)
                opt.step()
                rt.wait()
                if tr is not None:
                    tr.mark_step(ids.size)
            return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps

        def run_traced() -> None:
            tr = Trace(rt, bound=bound).start()
            traced.append(run(tr))
            t0 = time.perf_counter()
            tr.stop()
            stops.append(time.perf_counter() - t0)
            tasks.append(len(tr.tasks) / steps)

        run()                        # warm-up: allocation, perf models
        for r in range(repeats):
            if r % 2:
                run_traced()
                plain.append(run())
            else:
                plain.append(run())
                run_traced()
        workers = rt.nworkers
    p, t = (statistics.median(w for w, _ in runs) for runs in (plain, traced))
    ratio = statistics.median(b[0] / a[0] for a, b in zip(plain, traced))
    cpu_ratio = statistics.median(b[1] / a[1] for a, b in zip(plain, traced))
    return {"spec": spec.to_dict(), "config": spec.model_config().to_dict(), "batch": spec.batch,
            "scheduler": spec.scheduler, "workers": workers,
            "repeats": repeats, "steps_per_run": steps, "bound": bound,
            "tasks_per_step": statistics.median(tasks), "step_s_plain": p, "step_s_traced": t,
            "overhead": ratio - 1, "cpu_overhead": cpu_ratio - 1,
            "stop_s": statistics.median(stops), "plain_runs_s": [w for w, _ in plain],
            "traced_runs_s": [w for w, _ in traced]}


def per_task_us(ntasks: int = 20_000, repeats: int = 15, scheduler: str = DEFAULTS.scheduler,
                ncpu: int | None = DEFAULTS.ncpu) -> dict:
    """Wall time per task of ``ntasks`` fills of 1-element tiles, traced and not
    (median of paired differences)."""
    plain, traced = [], []
    with nl.Runtime(scheduler=scheduler, ncpu=ncpu) as rt:
        x = nl.empty((ntasks,), (1,))

        def run() -> np.ndarray:
            t0, c0 = time.perf_counter(), time.process_time()
            nl.ops.fill(x, 1.0)
            rt.wait()
            return np.array([time.perf_counter() - t0, time.process_time() - c0]) / ntasks * 1e6

        def run_traced() -> np.ndarray:
            with Trace(rt):
                return run()

        run()
        for r in range(repeats):
            if r % 2:
                traced.append(run_traced())
                plain.append(run())
            else:
                plain.append(run())
                traced.append(run_traced())
    diff = np.median(np.array(traced) - np.array(plain), axis=0)
    base = np.median(np.array(plain), axis=0)
    return {"tasks": ntasks, "repeats": repeats, "plain_us_per_task": base[0],
            "trace_us_per_task": diff[0], "plain_cpu_us_per_task": base[1],
            "trace_cpu_us_per_task": diff[1]}


def report(res: dict) -> str:
    return (f"GPT-2 step ({res['tasks_per_step']:.0f} tasks, {res['scheduler']}, "
            f"{res['workers']} workers): {res['step_s_plain'] * 1e3:.1f} ms untraced, "
            f"{res['step_s_traced'] * 1e3:.1f} ms traced (medians of {res['repeats']} runs of "
            f"{res['steps_per_run']} steps); overhead {100 * res['overhead']:+.1f}% wall, "
            f"{100 * res['cpu_overhead']:+.1f}% CPU time (medians of paired ratios); "
            f"collecting the tables afterwards: {res['stop_s'] * 1e3:.0f} ms")
