"""The scheduler sweep widget: every StarPU policy of this build on one model (the base
spec's: any registered model, ``base.model``), bars with
the spread over repeats (each repeat is the point with another ``seed``, so each is
measured and cached separately), optionally with task priorities on and off.

With OpenCL workers (the "OpenCL workers" box, or ``base.nopencl``: unlike workers,
docs/accelerators.md) the common choice is dmda, dmdas, heteroprio, eager and lws, and a
second plot shows where the tasks ran (share of tasks and kernel time on the device, from
each point's trace: ``plots.schedulers.placement_figure``).

``points()``, ``run()`` and ``start()``/``stop()`` are the callbacks (plain methods; tests
call them; the buttons as in the tile sweep widget). DOM classes: nl-sched-run, -stop,
-confirm, -status, -message, -plot, -placement, -repeats, -opencl (a plot's canvas:
<class>-canvas; a sentence in its place: <class>-words).
"""
from __future__ import annotations

import ipywidgets as w

from nntile_lab.bench.schedulers import UNLIKE_SCHEDULERS, summarize
from nntile_lab.plots.schedulers import placement_figure
from nntile_lab.plots.sweep import aggregate_repeats, best, scheduler_figure
from nntile_lab.spec import ExperimentSpec
from nntile_lab.sweep import grid
from nntile_lab.widgets.common import (
    NOT_APPLICABLE,
    PlotArea,
    SweepView,
    applicable_schedulers,
    check_base,
    check_count,
    int_box,
    notice_html,
    read_int,
)

__all__ = ["NOT_APPLICABLE", "SchedulerSweep", "applicable_schedulers"]

COMMON = ("eager", "prio", "ws", "lws", "dm", "dmda", "dmdas", "dmdar", "heteroprio")
MAX_REPEATS = 20


def _devices() -> int:
    """OpenCL devices StarPU can use here (0 in a build without OpenCL)."""
    from nntile_lab.runtime import opencl_devices  # the compiled extension, as above
    return opencl_devices()


class SchedulerSweep(SweepView):
    """``SchedulerSweep(base, schedulers=None, repeats=3)``; display it or its ``.view``.

    ``schedulers``: names (a list, or one name), None for the common ones; ``repeats``
    from 1 to ``MAX_REPEATS``."""

    def __init__(self, base: ExperimentSpec | None = None, schedulers=None, repeats: int = 3,
                 *, cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        self.base = check_base("SchedulerSweep", base)
        if isinstance(schedulers, str):      # one name, not its letters
            schedulers = [schedulers]
        if schedulers is not None and not all(isinstance(x, str) for x in schedulers):
            raise TypeError("SchedulerSweep(schedulers=...) takes scheduler names (a list of "
                            f"str, or one str), e.g. ['lws', 'dmda']; got {schedulers!r}")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or \
                not 1 <= repeats <= MAX_REPEATS:
            raise ValueError(f"SchedulerSweep(repeats={repeats!r}): give an integer from 1 "
                             f"to {MAX_REPEATS}")
        self._init_view("nl-sched", "Run schedulers", cache_dir, isolate, peak_gflops)
        names = applicable_schedulers()
        common = UNLIKE_SCHEDULERS if self.base.nopencl else COMMON
        chosen = [s for s in (schedulers or common) if s in names]
        # a name this build lacks cannot be a choice in the list: it is said, not dropped
        self.unknown = [s for s in (schedulers or ()) if s not in names]
        self.schedulers = w.SelectMultiple(options=names, value=tuple(chosen), rows=10,
                                           description="schedulers")
        self.repeats = int_box("repeats", repeats, "nl-sched-repeats", "230px", "110px")
        self.priorities = w.Checkbox(value=False, description="priorities on and off")
        self.max_opencl = max(_devices(), self.base.nopencl)
        self.nopencl = int_box("OpenCL workers", self.base.nopencl, "nl-sched-opencl",
                               "230px", "110px")
        self.plot = PlotArea("nl-sched-plot")
        self.placement = PlotArea("nl-sched-placement")
        self.view = w.VBox([w.HBox([self.schedulers,
                                    w.VBox([self.repeats, self.priorities, self.nopencl,
                                            w.HBox([self.run_button, self.stop_button]),
                                            self.status])]),
                            self.message, self.confirm_button, self.plot.box,
                            self.placement.box])
        self.message.value = notice_html(self._notes())

    def points(self, confirmed: bool = False) -> list:
        if not self.schedulers.value:
            raise ValueError("no scheduler selected: pick one or more in the schedulers list")
        repeats = read_int(self.repeats, 1, MAX_REPEATS)
        nopencl = read_int(self.nopencl, 0, self.max_opencl)
        axes = {"scheduler": list(self.schedulers.value),
                "seed": list(range(self.base.seed, self.base.seed + repeats))}
        if self.priorities.value:
            axes["priorities"] = [False, True]
        base = self.base.replace(nopencl=nopencl)
        check_count(axes, base.to_dict(), confirmed)
        self._repeats, self._nopencl = repeats, nopencl
        return grid(base, **axes)

    def _notes(self) -> list[str]:
        unknown = [f"unknown scheduler {s!r} left out; valid ones: "
                   f"{', '.join(self.schedulers.options)}" for s in self.unknown]
        prio = ["priorities: prio, lws, dmdas, dmdasd and heteroprio honour them; eager, ws, "
                "dm and dmda ignore them (both bars measure the same)"]
        return unknown + (prio if self.priorities.value else [])

    def _draw(self, df) -> None:
        if self._nothing_ran(df):
            return
        n = self._repeats
        title = f"Schedulers on {self.base.model}, {n} repeat{'s' if n > 1 else ''} each"
        self.plot.show(scheduler_figure(aggregate_repeats(df), title=title, spread="repeats"))
        if self._nopencl and df["trace_dir"].notna().any():
            k = self._nopencl
            self.placement.show(placement_figure(summarize(df), f"Where the tasks ran ({k} "
                                                 f"OpenCL worker{'s' if k > 1 else ''})"))
        else:
            self.placement.clear()

    def _best_text(self, df) -> str:
        b = best(aggregate_repeats(df))
        return ", none ran" if b is None else f", best {b['scheduler']}: {b['gflops']:.3g} GFLOP/s"

    def _forget(self) -> None:
        super()._forget()
        self.placement.clear()
