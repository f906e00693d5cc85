"""Sweeps: a grid or list of experiment specs, measured point by point into a DataFrame.

    from nntile_lab import sweep
    from nntile_lab.spec import ExperimentSpec
    points = sweep.grid(ExperimentSpec(n_layer=2), vocab_tile=[2048, 4096, 8192],
                        scheduler=["lws", "dmda"])
    df = sweep.run(points)            # cached, resumable, a row per point (errors too)

``grid``/``parse_axes`` (grid.py), ``measure`` one point in-process (measure.py), ``run``
(run.py: each point through the engine, ``nntile_lab.engine``), ``nntile-lab sweep``
(cli.py); the figures of a sweep are ``nntile_lab.plots.sweep``.
"""
from nntile_lab.engine import code_version
from nntile_lab.sweep.grid import InvalidSpec, grid, parse_axes, point
from nntile_lab.sweep.measure import measure
from nntile_lab.sweep.run import run

__all__ = ["InvalidSpec", "code_version", "grid", "measure", "parse_axes", "point", "run"]
