"""``tune``: the tiling with the highest measured throughput, in a fraction of a sweep's time.

    import nntile_lab as nl
    res = nl.tune(nl.spec.ExperimentSpec(), budget="3m")
    res.best, res.gflops, res.command

``space`` (the candidates), ``costs`` (per-codelet time models), ``graph`` (a step's task
graph and its replay on the workers), ``predict`` (a candidate's predicted step), ``run``
(the search, ``tune``), ``cli`` (``nntile-lab tune``). docs/tune.md says how and how well.

The package itself is callable — ``nl.tune(spec, budget=...)`` is ``tune.run.tune``: once
imported, a subpackage is its parent's attribute, so ``nntile_lab.tune`` can only be this
module, and a module of this class calls the function.
"""
import sys
import types

from nntile_lab.tune.run import TuneResult, tune


class _Callable(types.ModuleType):
    def __call__(self, *args, **kwargs) -> TuneResult:
        return tune(*args, **kwargs)


sys.modules[__name__].__class__ = _Callable

__all__ = ["TuneResult", "tune"]
