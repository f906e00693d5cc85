"""``tune``: the tiling with the highest measured throughput, in a fraction of a sweep's time.

    import nntile_lab as nl
    res = nl.tune(nl.spec.ExperimentSpec(), budget="3m")
    res.best, res.gflops, res.command

``space`` (the candidates), ``costs`` (per-codelet time models), ``graph`` (a step's task
graph and its replay on the workers), ``predict`` (a candidate's predicted step), ``run``
(the search, ``tune``), ``cli`` (``nntile-lab tune``). docs/tune.md says how and how well.
"""
from nntile_lab.tune.run import TuneResult, tune

__all__ = ["TuneResult", "tune"]
