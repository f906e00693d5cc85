"""The memory cap of a point: the process's resident size above a baseline, watched.

The cap is on the memory the run itself uses — like a GPU's memory is on a job: the
baseline is taken at ``start()``, once the process has loaded its libraries and warmed up
(``engine.measures``' ``starts_cap``). A thread samples the resident size every 20 ms and
calls ``on_over`` (the worker records "oom" and ends the process) the moment it goes over.
The peak is the kernel's own high-water mark (reset at ``start``), so a spike between two
samples still counts at ``stop()``; sampling only decides how soon a run over the cap is
stopped. (Sampling much faster preempts the compute threads: on 2 cores a 3 ms period
slowed PyTorch's OpenMP steps several-fold.)
"""
from __future__ import annotations

import threading

from nntile_lab.rss import peak_rss_bytes, reset_peak_rss, rss_bytes

MIB = 1 << 20


class CapExceeded(MemoryError):
    """The run went over its memory cap (the point's status: "oom")."""


class MemoryCap(threading.Thread):
    """``MemoryCap(cap_bytes, on_over)``; ``cap_bytes`` None: measured, never enforced."""

    def __init__(self, cap_bytes: int | None, on_over=None, period_s: float = 0.02):
        super().__init__(daemon=True)
        self.cap, self.on_over, self.period_s = cap_bytes, on_over, period_s
        self.baseline = 0
        self.exact = False
        self.started = False
        self._done = threading.Event()

    def start(self) -> None:
        if self.started:
            return
        self.exact = reset_peak_rss()
        self.baseline = rss_bytes()
        self.started = True
        super().start()

    def used(self) -> int:
        """Peak bytes above the baseline so far."""
        hwm = peak_rss_bytes() if self.exact else None
        return (hwm if hwm is not None else rss_bytes()) - self.baseline

    def reason(self, used: int, verb: str = "used") -> str:
        return (f"{verb} {used / MIB:.0f} MiB above its start, over the "
                f"{self.cap / MIB:.0f} MiB cap")

    def run(self) -> None:
        while not self._done.wait(self.period_s):
            used = self.used()
            if self.cap is not None and used > self.cap and self.on_over is not None:
                self.on_over(used)

    def stop(self) -> int:
        """End the watch; the peak bytes above the baseline (0 if never started)."""
        if not self.started:
            return 0
        self._done.set()
        self.join()
        return self.used()

    def check(self) -> int:
        """``stop()``, raising CapExceeded when the peak went over (between two samples)."""
        used = self.stop()
        if self.cap is not None and used > self.cap:
            raise CapExceeded(self.reason(used, "peaked"))
        return used
