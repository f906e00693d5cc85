"""The stall watchdog: a wait on StarPU's tasks that can never end becomes an error.

Out of core, when the tiles held leave no room to move a tile between RAM and the
disk node, StarPU's workers retry forever (100 % CPU, no task ends). The memory
guard (kernels/runtime/guard.c, ``Runtime.reserve``) refuses the states known to do this;
the watchdog is the net under it: every wait polls it, and when no task ended and
none was submitted for ``timeout_s`` seconds while every memory node is full, it declares
a stall. It then makes the runtime refuse new tasks, lends the full nodes the memory
the queued tasks need (StarPU's accounting only, so that they can end and the runtime
can be stopped) and raises ``OutOfMemory`` naming the numbers. A long kernel with
free memory is never a stall. Every node StarPU accounts is checked, so a device with
its own memory (an accelerator) is covered the same way as RAM and the disk node.
"""
from __future__ import annotations

import sys
import time

from nntile_lab._lib import ffi, lib

MIB = 1 << 20


class Watchdog:
    """Polled by every interruptible wait of one runtime (``poll``)."""

    def __init__(self, runtime, timeout_s: float | None, error: type = MemoryError):
        self.runtime = runtime
        self.timeout_s = timeout_s
        self.error_type = error    # the runtime's OutOfMemory (this module sits below it)
        self.error = None          # the stall declared, if any (raised again by stop/wait)
        self._mark = None
        self._since = 0.0
        self._lent = 0

    def arm(self) -> None:
        """A new wait begins: progress is measured from now."""
        self._mark = None

    def poll(self, draining: bool = False) -> None:
        """Check progress; on a stall lend memory and raise (unless ``draining``:
        the runtime is being stopped and must only get its tasks done)."""
        now = time.monotonic()
        mark = (lib.starpu_task_nsubmitted(), lib.nl_guard_submitted())
        if mark != self._mark:
            self._mark, self._since = mark, now
            return
        if self.timeout_s is None or now - self._since < self.timeout_s:
            return
        full, accounted = self.full_nodes()
        if not full:
            return   # a long kernel: the tasks will end
        if len(full) < accounted:
            # Room left somewhere to evict to: StarPU moves tiles there, except that StarPU
            # 1.3 was seen spinning with RAM full and the disk node free (under heavy load,
            # while stopping). Then, and only while stopping, lend after twice the timeout:
            # no new work is taken, the queued tasks' results are unaffected, no error.
            if draining and now - self._since >= 2 * self.timeout_s:
                self._since = now
                self._lend(full)
                print(f"nntile_lab: no task ended for {2 * self.timeout_s:g} s while "
                      f"stopping with {_names(full)} full: lent memory to finish the "
                      "queued tasks", file=sys.stderr)
            return
        self._since = now   # give what is lent time to act before lending more
        first = self.error is None
        if first:
            self.error = self._describe(full, now)
        lib.nl_guard_stall(1)
        self._lend(full)
        if not draining:
            raise self.error

    def full_nodes(self) -> tuple[list[tuple[int, str, int, int]], int]:
        """(node, name, total, available) of the nodes with less room than one task, and
        how many nodes StarPU accounts. A livelock needs them all full: while one has
        room (a disk node, RAM under an accelerator), StarPU can evict there."""
        need = max(lib.nl_guard_max_task(), 1)
        out, accounted = [], 0
        for node in range(lib.starpu_memory_nodes_get_count()):
            total = lib.starpu_memory_get_total(node)
            if total < 0:
                continue
            accounted += 1
            free = lib.starpu_memory_get_available(node)
            if free < need:
                out.append((node, _node_name(node), total, free))
        return out, accounted

    def _lend(self, full) -> None:
        step = max(lib.nl_guard_reserve(0), 4 * MIB) << min(self._lent, 6)
        for node, *_ in full:
            lib.nl_guard_relieve(node, step)
        self._lent += 1

    def _describe(self, full, now) -> Exception:
        rt = self.runtime
        nodes = _names(full)
        held = lib.nl_held_bytes()
        need = -(-(held + lib.nl_guard_reserve(0)) // MIB)
        if rt.ooc_dir is not None:
            fix = (f"give the disk node ooc_size_mb ≥ {need - rt.memory_limit_mb} or raise "
                   "memory_limit_mb")
        else:
            fix = (f"raise memory_limit_mb to ≥ {need} or give ooc_dir= (a disk node) with "
                   f"ooc_size_mb ≥ {max(16, need - (rt.memory_limit_mb or 0))}")
        return self.error_type(
            f"StarPU stalled: no task ended for {self.timeout_s:g} s while memory was full "
            f"({nodes}); the tiles held ({held / MIB:.1f} MiB) leave no room to move tiles "
            f"between RAM and disk, so the workers would spin forever. The runtime now "
            f"refuses new work and finishes what was queued over its limit: leave its "
            f"`with` block (or call rt.stop()), then {fix}, or use fewer or smaller tensors")


def _names(full) -> str:
    return ", ".join(f"{name} {free / MIB:.1f} MiB free of {total / MIB:.1f}"
                     for _, name, total, free in full)


def _node_name(node: int) -> str:
    buf = ffi.new("char[]", 64)
    lib.starpu_memory_node_get_name(node, buf, 64)
    name = ffi.string(buf).decode(errors="replace")
    if name.startswith("NUMA"):
        return "RAM" if name == "NUMA 0" else f"RAM ({name})"
    return "disk node" if name.startswith("Disk") else name
