"""Plots of records: one place for every study's figures.

A figure here is a function of records — of the engine's records (``nntile_lab.engine``)
or of the table a study makes from them — that returns a ``jupyter_figure.Figure`` (it shows
itself in Jupyter; no pyplot state). ``common`` holds what several figures share (saving a
figure with the table behind it, a figure that is a sentence, grouped bars, model-size
labels).

- ``sweep``: a sweep's GFLOP/s and step time against its varied axes, schedulers' bars
  (``nntile-lab sweep``, the sweep widgets)
- ``paper``: the NNTile paper's figures at this machine's scale (``nntile-lab figures``)
- ``depth``, ``schedulers``: ``bench depth`` and ``bench schedulers``
- ``tune``: what ``nntile-lab tune`` measured against what it predicted

A new study's figure goes here, beside these. (Plots of one run — a trace's Gantt chart and
memory, ``trace.viz``; a training run's loss curve, ``train.plots`` — stay with the run.)
"""
