"""The scheduler sweep widget: every StarPU policy of this build on one model, bars with
the spread over repeats (each repeat is the point with another ``seed``, so each is
measured and cached separately), optionally with task priorities on and off.

``points()`` and ``run()`` are the callbacks (plain methods; tests call them).
"""
from __future__ import annotations

import ipywidgets as w
import pandas as pd

from nntile_lab.spec import ExperimentSpec
from nntile_lab.widgets.common import error_html, failures, image, label, notice_html, png

# Test policies, not schedulers for real work.
NOT_APPLICABLE = ("graph_test",)
COMMON = ("eager", "prio", "ws", "lws", "dm", "dmda", "dmdas", "dmdar", "heteroprio")


def applicable_schedulers() -> list[str]:
    """Every scheduling policy of this StarPU build that applies to a CPU run."""
    from nntile_lab.runtime import scheduler_names
    return [s for s in scheduler_names() if s not in NOT_APPLICABLE]


class SchedulerSweep:
    """``SchedulerSweep(base, schedulers=None, repeats=3)``; display it or its ``.view``."""

    def __init__(self, base: ExperimentSpec | None = None, schedulers=None, repeats: int = 3,
                 *, cache_dir=None, isolate: bool = True, peak_gflops: float | None = None):
        self.base = base or ExperimentSpec()
        self.cache_dir, self.isolate, self.peak_gflops = cache_dir, isolate, peak_gflops
        names = applicable_schedulers()
        chosen = [s for s in (schedulers or COMMON) if s in names]
        self.schedulers = w.SelectMultiple(options=names, value=tuple(chosen), rows=10,
                                           description="schedulers")
        self.repeats = w.BoundedIntText(value=repeats, min=1, max=20, description="repeats")
        self.priorities = w.Checkbox(value=False, description="priorities on and off")
        self.run_button = w.Button(description="Run schedulers", button_style="primary",
                                   icon="play")
        self.run_button.add_class("nl-sched-run")
        self.run_button.on_click(lambda _: self.run())
        self.status = label("nl-sched-status", "0 points")
        self.message = label("nl-sched-message")
        self.plot = image("nl-sched-plot")
        self.df: pd.DataFrame | None = None
        self.rows: list[dict] = []
        self.view = w.VBox([w.HBox([self.schedulers,
                                    w.VBox([self.repeats, self.priorities, self.run_button,
                                            self.status])]),
                            self.message, self.plot])

    def _ipython_display_(self):
        from IPython.display import display
        display(self.view)

    def points(self) -> list:
        from nntile_lab.sweep import grid
        if not self.schedulers.value:
            raise ValueError("no scheduler selected: pick one or more in the list")
        axes = {"scheduler": list(self.schedulers.value),
                "seed": list(range(self.base.seed, self.base.seed + self.repeats.value))}
        if self.priorities.value:
            axes["priorities"] = [False, True]
        return grid(self.base, **axes)

    def run(self) -> pd.DataFrame | None:
        """The Run button: every selected policy × repeat (× priorities), bars redrawn
        after each point; returns the per-repeat rows (None on bad input)."""
        from nntile_lab.sweep import run
        from nntile_lab.sweep.plots import aggregate_repeats, best
        self.message.value = ""
        try:
            pts = self.points()
        except ValueError as exc:
            self.message.value = error_html(str(exc))
            return None
        self.rows, self._total = [], len(pts)
        self.status.value = f"running: 0 of {len(pts)} points"
        self.run_button.disabled = True
        try:
            df = run(pts, self.cache_dir, isolate=self.isolate, progress=False,
                     on_point=self._on_point, peak_gflops=self.peak_gflops)
        except Exception as exc:
            self.message.value = error_html(f"{type(exc).__name__}: {exc}")
            return None
        finally:
            self.run_button.disabled = False
        self.df = df
        agg = aggregate_repeats(df)
        b = best(agg)
        notes = list(df.attrs.get("messages", []))
        if self.priorities.value:
            notes.append("priorities: the spec's `priorities` field is reserved; until the "
                         "runtime sets task priorities both bars measure the same thing")
        self.message.value = notice_html([*notes, *failures(df)])
        self.status.value = f"done: {len(df)} points" + (
            f", best {b['scheduler']}: {b['gflops']:.1f} GFLOP/s" if b is not None else
            ", none ran")
        self._draw(df)
        return df

    def _on_point(self, row: dict) -> None:
        self.rows.append(row)
        self.status.value = f"running: {len(self.rows)} of {self._total} points"
        self._draw(pd.DataFrame.from_records(self.rows))

    def _draw(self, df: pd.DataFrame) -> None:
        from nntile_lab.sweep.plots import aggregate_repeats, scheduler_figure
        self.plot.value = png(scheduler_figure(aggregate_repeats(df),
                                               title=f"Schedulers ({self.repeats.value} "
                                                     "repeats: bars min–max over repeats)"))
