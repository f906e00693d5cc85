"""What the trace's tables mean without a runtime: the memory table's nodes and its
totals over time. Plain pandas, so saved traces are read and drawn without StarPU."""
from __future__ import annotations

import pandas as pd

REGISTERED_NODE = -1   # the bytes of registered tiles, where no node has accounting


def used_over_time(memory: pd.DataFrame) -> pd.Series:
    """Bytes StarPU holds over all real memory nodes at each sample time (the
    registered-tiles fallback where no node has accounting)."""
    if memory.empty:
        return pd.Series(dtype=float)
    real = memory[memory["node"] != REGISTERED_NODE]
    src = real if not real.empty else memory
    return src.groupby("t_us")["used_bytes"].sum()


def peak_used(memory: pd.DataFrame) -> float:
    used = used_over_time(memory)
    return float(used.max()) if not used.empty else 0.0
