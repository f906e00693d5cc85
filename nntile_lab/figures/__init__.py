"""The NNTile paper's figures redrawn at this machine's scale.

``run_figures(plan, out_dir)`` measures nntile_lab and PyTorch on the paper's GPT-2 family
(each point in its own process, under one memory cap), writes a record per point and draws:
(a)/(b) training GFLOP/s against model size for 4 and 8 layers, (c) memory by category, and
the paper's own points in the same style; ``redraw(out_dir)`` redraws from the records alone.
``FigurePlan(model="llama")`` (any registered model) sweeps that model's family at the same
sizes and cap, PyTorch's Llama beside it.
``nntile-lab figures [--smoke] [--model llama] [--out DIR] [--from DIR]`` does the same from a
shell.
"""
from nntile_lab.figures.family import (
    FULL,
    QUICK,
    SMOKE,
    FigurePlan,
    family_params,
    is_smoke_env,
)
from nntile_lab.figures.run import redraw, run_figures

__all__ = ["FULL", "QUICK", "SMOKE", "FigurePlan", "family_params", "is_smoke_env", "redraw",
           "run_figures"]
