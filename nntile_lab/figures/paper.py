"""The paper's own data points, as read from its vector figures.

Source: A. Mikhalev, A. Katrutsa, K. Sozykin, I. Oseledets, "NNTile: a machine learning
framework capable of training extremely large GPT language models on a single node",
arXiv:2504.13236 (2025): its throughput figures for custom GPT-2 models (total Tflop/s
against model size; 4 layers on 4×A100-80GB, 4 layers on 8×A100-80GB, 8 layers on
8×A100-80GB), read to about ±2 Tflop/s.  Model sizes are the
family's ``E = 5120 + 1024·k``; a throughput of 0 is a run that failed (out of memory).  Only
values the text states are here: a range ("752–773 up to 7.9B") is kept as its midpoint on
each size it covers, flagged ``approx``; sizes the text skips ("…") are absent, not guessed.
"""
from __future__ import annotations

import pandas as pd

from nntile_lab.figures.family import family_params

SETUPS = {"4L_4xA100": "4 layers, 4×A100-80GB", "4L_8xA100": "4 layers, 8×A100-80GB",
          "8L_8xA100": "8 layers, 8×A100-80GB"}
SERIES = ("NNTile tf32", "PyTorch FSDP tf32", "PyTorch FSDP bf16")

# (setup, series) -> {k: Tflops/s}, k indexes E = 5120 + 1024·k; a tuple = a stated range
_POINTS = {
    ("4L_4xA100", "NNTile tf32"): {0: 327, 7: 359, 13: 342, 17: 267, 18: 0},
    ("4L_4xA100", "PyTorch FSDP tf32"): {**dict.fromkeys(range(4), (355, 365)), 4: 345,
                                         5: 244, 6: 148, 7: 0},
    ("4L_4xA100", "PyTorch FSDP bf16"): {**dict.fromkeys(range(8), (752, 773)), 8: 733,
                                         9: 529, 10: 439, 11: 293, 12: 264, 13: 0},
    ("4L_8xA100", "NNTile tf32"): {0: 559, 9: 719, 19: 502, 26: 349, 27: 0},
    ("4L_8xA100", "PyTorch FSDP tf32"): {0: 716, 4: 696, 5: 520, 6: 347, 7: 244, 8: 0},
    ("4L_8xA100", "PyTorch FSDP bf16"): {**dict.fromkeys(range(9), (1492, 1522)), 9: 1421,
                                         10: 1031, 11: 724, 12: 703, 13: 0},
    ("8L_8xA100", "NNTile tf32"): {0: 529, 10: 387, 17: 317, 18: 0},
    ("8L_8xA100", "PyTorch FSDP tf32"): {0: 701, 4: 598, 5: 306, 6: 0},
    ("8L_8xA100", "PyTorch FSDP bf16"): {**dict.fromkeys(range(7), (1471, 1511)), 7: 1405,
                                         8: 1170, 9: 587, 10: 0},
}
def _layers(setup: str) -> int:
    return int(setup.split("L_")[0])


def reference_points() -> pd.DataFrame:
    """Columns: setup, layers, series, n_embd, params_b, tflops, approx."""
    rows = []
    for (setup, series), pts in _POINTS.items():
        for k, v in pts.items():
            e = 5120 + 1024 * k
            approx = isinstance(v, tuple)
            rows.append({"setup": setup, "layers": _layers(setup), "series": series,
                         "n_embd": e, "params_b": family_params(_layers(setup), e) / 1e9,
                         "tflops": sum(v) / 2 if approx else float(v), "approx": approx})
    return pd.DataFrame(rows).sort_values(["setup", "params_b", "series"],
                                          ignore_index=True)
