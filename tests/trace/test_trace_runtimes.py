"""Traces across runtimes: out-of-core transfers, a runtime stopped under a trace."""
import nntile_lab as nl
from nntile_lab.trace import Trace


def test_transfers_to_disk_are_counted(tmp_path):
    """Tiles beyond a 16 MiB cap go to the disk node: the RAM → disk bus carries bytes."""
    with nl.Runtime(memory_limit_mb=16, ooc_dir=str(tmp_path), ncpu=2) as rt:
        with Trace(rt) as tr:
            tensors = [nl.full((512, 512), float(i), (256, 256)) for i in range(24)]  # 24 MiB
            rt.wait()
        assert float(tensors[0].to_numpy()[0, 0]) == 0.0
    b = tr.buses
    assert len(b) >= 2 and b["bytes"].sum() >= 8 << 20
    assert any(dst.startswith("Disk") for dst in b[b["bytes"] > 0]["dst"])
    disk = tr.memory[tr.memory["name"].str.startswith("Disk")]
    assert disk["used_bytes"].max() >= 8 << 20


def test_runtime_stopped_while_recording():
    """The runtime stops under a running trace: stop() still returns its tasks, and the
    next runtime can record again."""
    with nl.Runtime(ncpu=2) as rt:
        tr = Trace(rt).start()
        nl.full((8,), 1.0, (4,))
    tr.stop()
    assert tr.tasks["name"].tolist() == ["fill", "fill"]
    with nl.Runtime(ncpu=2) as rt, Trace(rt) as again:
        nl.full((8,), 1.0, (2,))
    assert len(again.tasks) == 4
