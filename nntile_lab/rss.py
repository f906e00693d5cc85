"""The process's resident memory, as the kernel counts it (Linux /proc), for every
measurement that reports a peak: sweeps, benchmarks, figure points, the memory planner.

``peak_rss_bytes`` reads VmHWM, the high-water mark of this process image
(``ru_maxrss`` would not do: exec keeps the parent's peak, so a child started from a
350 MiB pytest process reports at least 350 MiB); ``reset_peak_rss`` sets the mark back
to the current size, so a peak measures one run of a long-lived process alone.
"""
from __future__ import annotations

import os

MIB = float(1 << 20)


def peak_rss_bytes() -> int | None:
    """The peak resident size of this process since start or the last reset; None off
    Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float | None:
    peak = peak_rss_bytes()
    return None if peak is None else peak / MIB


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current resident size (Linux ≥ 4.0); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_bytes() -> int:
    """The resident size now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
