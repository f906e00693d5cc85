"""The watchdog's decisions on a stalled wait, from node states it is shown (a fake of the
few StarPU calls it makes): no help for a long kernel, an error when every node is full,
and — only while the runtime stops — memory lent when RAM is full beside a free disk node."""
import types

import pytest

from nntile_lab import watchdog

MIB = 1 << 20


class Clock:
    t = 1000.0

    def __call__(self):
        return self.t


def fake_lib(nodes):
    """nodes: [(total, free)] per memory node; nothing ever ends (a stall)."""
    relieved = []
    lib = types.SimpleNamespace(
        starpu_task_nsubmitted=lambda: 7, nl_guard_submitted=lambda: 7,
        nl_guard_max_task=lambda: MIB, starpu_memory_nodes_get_count=lambda: len(nodes),
        starpu_memory_get_total=lambda n: nodes[n][0],
        starpu_memory_get_available=lambda n: nodes[n][1],
        nl_guard_reserve=lambda _: 0, nl_guard_stall=lambda _: None,
        nl_guard_relieve=lambda n, b: relieved.append((n, b)), nl_held_bytes=lambda: 0)
    return lib, relieved


@pytest.fixture
def dog(monkeypatch):
    def make(nodes):
        lib, relieved = fake_lib(nodes)
        clock = Clock()
        monkeypatch.setattr(watchdog, "lib", lib)
        monkeypatch.setattr(watchdog.time, "monotonic", clock)
        monkeypatch.setattr(watchdog, "_node_name", lambda n: ["RAM", "disk node"][n])
        rt = types.SimpleNamespace(ooc_dir="/tmp/x", memory_limit_mb=16)
        d = watchdog.Watchdog(rt, 30.0, MemoryError)
        d.arm()
        d.poll()          # the first poll takes the mark
        return d, clock, relieved
    return make


def test_free_memory_is_never_a_stall(dog):
    d, clock, relieved = dog([(16 * MIB, 8 * MIB)])
    clock.t += 1000
    d.poll()
    d.poll(draining=True)
    assert relieved == [] and d.error is None


def test_every_node_full_raises_and_lends(dog):
    d, clock, relieved = dog([(16 * MIB, 0)])
    clock.t += 31
    with pytest.raises(MemoryError, match="StarPU stalled"):
        d.poll()
    assert relieved and relieved[0][0] == 0


def test_ram_full_beside_a_free_disk_lends_only_while_stopping(dog):
    d, clock, relieved = dog([(16 * MIB, 0), (256 * MIB, 200 * MIB)])
    clock.t += 100
    d.poll()                       # running: the disk node has room, StarPU may evict there
    assert relieved == [] and d.error is None
    d.poll(draining=True)          # stopping, stalled for > 2 × the timeout: lend, no error
    assert [n for n, _ in relieved] == [0] and d.error is None
    d.poll(draining=True)          # lent just now: give it time before lending more
    assert len(relieved) == 1
