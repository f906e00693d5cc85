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


# ---- memory nodes and the buses between them (the accelerator's memory) ------------------
NODE_KINDS = (("NUMA", "RAM"), ("OpenCL", "device"), ("CUDA", "device"), ("Disk", "disk"))


def node_kind(name: str) -> str:
    """"RAM", "device" (an accelerator's own memory) or "disk" for a StarPU memory node's
    name ("NUMA 0", "OpenCL 0", "Disk 0"); "other" for anything else."""
    return next((kind for prefix, kind in NODE_KINDS if str(name).startswith(prefix)), "other")


BUS_COLUMNS = ["src", "dst", "direction", "bytes", "transfers", "mean_bytes", "time_us"]


def bus_transfers(buses: pd.DataFrame) -> pd.DataFrame:
    """One row per bus that moved data (a direction between two memory nodes: RAM → device
    and device → RAM are two buses): bytes, how many transfers, their mean size, and
    StarPU's time on the bus, largest first."""
    if buses.empty:
        return pd.DataFrame(columns=BUS_COLUMNS)
    moved = buses[buses["bytes"] > 0].copy()
    moved["direction"] = [f"{node_kind(s)} → {node_kind(d)}"
                          for s, d in zip(moved["src"], moved["dst"])]
    moved["mean_bytes"] = moved["bytes"] / moved["transfers"].clip(lower=1)
    return (moved.sort_values("bytes", ascending=False)[BUS_COLUMNS].reset_index(drop=True))


def node_timeline(memory: pd.DataFrame) -> pd.DataFrame:
    """Bytes StarPU holds on each real memory node over time: one column per node name
    (RAM, each device, the disk node), indexed by the sample time (µs)."""
    real = memory[memory["node"] != REGISTERED_NODE] if len(memory) else memory
    if real.empty:
        return pd.DataFrame()
    return real.pivot_table(index="t_us", columns="name", values="used_bytes", aggfunc="max")
