"""Memory lent to StarPU (the watchdog's way out of a stall) never wraps StarPU 1.3's
size_t count of a node's used bytes, and is taken back before the tiles are freed: with
the count wrapped, every later allocation smaller than the excess failed and Runtime.stop()
waited forever in starpu_data_unregister."""
import numpy as np

import nntile_lab as nl
from nntile_lab._lib import lib

MIB = 1 << 20


def _used(node: int) -> int:
    return lib.starpu_memory_get_total(node) - lib.starpu_memory_get_available(node)


def test_a_loan_is_at_most_what_is_in_use_and_is_repaid_exactly(tmp_path):
    with nl.Runtime(memory_limit_mb=32, ooc_dir=str(tmp_path), ncpu=2) as rt:
        x = nl.from_numpy(np.ones((512, 512), np.float32), (256, 256))
        y = nl.ops.scale(x, 2.0)
        rt.wait()
        before = _used(0)
        assert before >= 2 * MIB   # x and y are in RAM
        lent = lib.nl_guard_relieve(0, 1 << 40)   # far more than is in use
        assert lent == before and _used(0) == 0
        assert lib.nl_guard_relieve(0, MIB) == 0   # nothing left to lend
        assert lib.nl_guard_repay() == before and _used(0) == before
        assert lib.nl_guard_repay() == 0
        assert float(y.to_numpy().min()) == float(y.to_numpy().max()) == 2.0


def test_stop_with_a_loan_out_frees_every_tile_and_returns(tmp_path):
    """A loan still out when the runtime stops (the watchdog lent while draining): tiles
    allocated meanwhile get their room, stop() takes the loan back and frees every tile
    against exact counts, and the next runtime starts with none lent."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(16)]
    with nl.Runtime(memory_limit_mb=32, ooc_dir=str(tmp_path), ncpu=2) as rt:
        tensors = [nl.from_numpy(a, (256, 256)) for a in arrays]   # 16 MiB
        rt.wait()
        assert lib.nl_guard_relieve(0, 1 << 40) > 0
        doubled = [nl.ops.scale(t, 2.0) for t in tensors]           # + 16 MiB of new tiles
        rt.wait()
        for a, d in zip(arrays, doubled):
            np.testing.assert_array_equal(d.to_numpy(), 2 * a)
    assert not rt.alive and nl.Runtime.active is None
    with nl.Runtime(memory_limit_mb=32, ooc_dir=str(tmp_path), ncpu=2) as rt:
        assert lib.nl_guard_repay() == 0 and _used(0) == 0
        x = nl.from_numpy(arrays[0], (256, 256))
        np.testing.assert_array_equal(nl.ops.scale(x, 0.5).to_numpy(), 0.5 * arrays[0])
