"""Jupyter widgets over the sweep and trace APIs (thin views; every callback is a plain
method, so tests drive them without a browser). DOM classes for browser tests are listed
in each class's docstring and /work/coord/CONTRACTS.md ("Widgets")."""
from nntile_lab.widgets.scheduler_sweep import SchedulerSweep, applicable_schedulers
from nntile_lab.widgets.tile_sweep import TileSweep
from nntile_lab.widgets.trace_explorer import TraceExplorer

__all__ = ["SchedulerSweep", "TileSweep", "TraceExplorer", "applicable_schedulers"]
