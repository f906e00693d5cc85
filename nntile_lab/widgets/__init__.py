"""Jupyter widgets over the sweep, trace and generation APIs (thin views; every callback is a plain
method, so tests drive them without a browser). Their contract (nothing stale, empty results
in words, the fields' own names, plots at their size, one colour per op) and the DOM classes
the browser tests use: docs/jupyter.md ("The widgets"), and each class's docstring."""
from nntile_lab.widgets.generate import GenerateWidget
from nntile_lab.widgets.scheduler_sweep import SchedulerSweep, applicable_schedulers
from nntile_lab.widgets.tile_sweep import TileSweep
from nntile_lab.widgets.trace_explorer import TraceExplorer

__all__ = ["GenerateWidget", "SchedulerSweep", "TileSweep", "TraceExplorer",
           "applicable_schedulers"]
