"""The scheduler sweep widget: every StarPU policy of this build on one model, bars with
the spread over repeats (each repeat is the point with another ``seed``, so each is
measured and cached separately), optionally with task priorities on and off.

With OpenCL workers (the "OpenCL workers" box, or ``base.nopencl``: unlike workers,
docs/accelerators.md) the common choice is dmda, dmdas, heteroprio, eager and lws, and a
second plot shows where the tasks ran (share of tasks and kernel time on the device, from
each point's trace: ``plots.schedulers.placement_figure``).

``points()`` and ``run()`` are the callbacks (plain methods; tests call them). DOM
classes: nl-sched-run, -status, -message, -plot (the plot's canvas: nl-sched-plot-canvas; a
sentence in its place: nl-sched-plot-words).
"""
from __future__ import annotations

import ipywidgets as w

from nntile_lab.bench.schedulers import UNLIKE_SCHEDULERS, summarize
from nntile_lab.plots.schedulers import placement_figure
from nntile_lab.plots.sweep import aggregate_repeats, best, scheduler_figure
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import grid
from nntile_lab.widgets.common import PlotArea, SweepView, notice_html

# Test policies, not schedulers for real work.
NOT_APPLICABLE = ("graph_test",)
COMMON = ("eager", "prio", "ws", "lws", "dm", "dmda", "dmdas", "dmdar", "heteroprio")


def applicable_schedulers() -> list[str]:
    """Every scheduling policy of this StarPU build that applies to a CPU run."""
    # loads the compiled extension: importing this module must not (--help, readers)
    from nntile_lab.runtime import scheduler_names
    return [s for s in scheduler_names() if s not in NOT_APPLICABLE]


def _devices() -> int:
    """OpenCL devices StarPU can use here (0 in a build without OpenCL)."""
    from nntile_lab.runtime import opencl_devices  # the compiled extension, as above
    return opencl_devices()


class SchedulerSweep(SweepView):
    """``SchedulerSweep(base, schedulers=None, repeats=3)``; display it or its ``.view``."""

    def __init__(self, base: ExperimentSpec | None = None, schedulers=None, repeats: int = 3,
                 *, cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        self.base = base or ExperimentSpec()
        self._init_view("nl-sched", "Run schedulers", cache_dir, isolate, peak_gflops)
        names = applicable_schedulers()
        common = UNLIKE_SCHEDULERS if self.base.nopencl else COMMON
        chosen = [s for s in (schedulers or common) if s in names]
        # a name this build lacks cannot be a choice in the list: it is said, not dropped
        self.unknown = [s for s in (schedulers or ()) if s not in names]
        self.schedulers = w.SelectMultiple(options=names, value=tuple(chosen), rows=10,
                                           description="schedulers")
        self.repeats = w.BoundedIntText(value=repeats, min=1, max=20, description="repeats")
        self.priorities = w.Checkbox(value=False, description="priorities on and off")
        self.nopencl = w.BoundedIntText(value=self.base.nopencl, min=0,
                                        max=max(_devices(), self.base.nopencl),
                                        description="OpenCL workers")
        self.plot = PlotArea("nl-sched-plot")
        self.placement = PlotArea("nl-sched-placement")
        self.view = w.VBox([w.HBox([self.schedulers,
                                    w.VBox([self.repeats, self.priorities, self.nopencl,
                                            self.run_button, self.status])]),
                            self.message, self.plot.box, self.placement.box])
        self.message.value = notice_html(self._notes())

    def points(self) -> list:
        if not self.schedulers.value:
            raise ValueError("no scheduler selected: pick one or more in the list")
        axes = {"scheduler": list(self.schedulers.value),
                "seed": list(range(self.base.seed, self.base.seed + self.repeats.value))}
        if self.priorities.value:
            axes["priorities"] = [False, True]
        return grid(self.base.replace(nopencl=self.nopencl.value), **axes)

    def _notes(self) -> list[str]:
        unknown = [f"unknown scheduler {s!r} left out; valid ones: "
                   f"{', '.join(self.schedulers.options)}" for s in self.unknown]
        prio = ["priorities: prio, lws, dmdas, dmdasd and heteroprio honour them; eager, ws, "
                "dm and dmda ignore them (both bars measure the same)"]
        return unknown + (prio if self.priorities.value else [])

    def _draw(self, df) -> None:
        if self._nothing_ran(df):
            return
        n = self.repeats.value
        self.plot.show(scheduler_figure(aggregate_repeats(df), title=f"Schedulers, {n} "
                                        f"repeat{'s' if n > 1 else ''} each", spread="repeats"))
        if self.nopencl.value and df["trace_dir"].notna().any():
            k = self.nopencl.value
            self.placement.show(placement_figure(summarize(df), f"Where the tasks ran ({k} "
                                                 f"OpenCL worker{'s' if k > 1 else ''})"))
        else:
            self.placement.clear()

    def _best_text(self, df) -> str:
        b = best(aggregate_repeats(df))
        return ", none ran" if b is None else f", best {b['scheduler']}: {b['gflops']:.3g} GFLOP/s"
