"""The tilings a tune chooses among: the ladder of each tile, fixed and varied fields, the
grid's invalid and unrunnable points, and "nothing to vary"."""
import pytest

from nntile_lab.errors import UsageError
from nntile_lab.spec import DEFAULTS, ExperimentSpec
from nntile_lab.tune.space import feasible, ladder, space


def test_the_ladder_of_each_tile_of_the_main_job():
    s = DEFAULTS     # L4 E256 H4 T128 B8 V50257
    assert ladder(s, "batch_tile") == [1, 2, 4, 8]          # every tile ≥ 64 tokens
    assert ladder(s, "inner_tile") == [128, 256, 512, 1024]  # n_inner/8 … whole
    assert ladder(s, "head_tile") == [1, 2, 4]
    assert ladder(s, "vocab_tile") == [2048, 4096, 8192, 16384, 50257]
    assert ladder(s, "embd_tile") == [32, 64, 128, 256]
    # a batch tile holds at least 64 tokens, unless the whole batch holds fewer
    assert ladder(s.replace(seq_len=16, n_positions=16), "batch_tile") == [4, 8]
    assert ladder(ExperimentSpec(batch=2, seq_len=8), "batch_tile") == [2]


def test_axes_fixed_fields_and_the_grid():
    sp = space(DEFAULTS, {"inner_tile": [256, 512], "head_tile": [2], "vocab_tile": [4096]})
    assert list(sp.axes) == ["batch_tile", "inner_tile"]   # head and vocab fixed by one value
    assert sp.fixed["head_tile"] == 2 and sp.fixed["vocab_tile"] == 4096
    assert sp.fixed["embd_tile"] is None and sp.fixed["seq_tile"] is None   # whole
    assert sp.size == 8 == len(sp.candidates) and not sp.invalid
    assert {(c.batch_tile, c.inner_tile) for c in sp.candidates} == {
        (b, i) for b in (1, 2, 4, 8) for i in (256, 512)}
    assert all(c.head_tile == 2 and c.vocab_tile == 4096 for c in sp.candidates)
    assert sp.label(sp.candidates[0]) == "batch_tile=1, inner_tile=256"


def test_invalid_points_are_dropped_with_their_reason():
    sp = space(DEFAULTS, {"inner_tile": [512, 4096], "batch_tile": [8], "head_tile": [2],
                          "vocab_tile": [4096]})
    assert len(sp.candidates) == 1 and len(sp.invalid) == 1
    assert "inner_tile=4096 (--inner-tile) must be from 1 to n_inner=1024" in sp.invalid[0][1]


def test_nothing_to_vary_is_one_clear_error():
    fixed = {f: [v] for f, v in (("batch_tile", 2), ("seq_tile", None), ("embd_tile", None),
                                 ("inner_tile", 512), ("head_tile", 2), ("vocab_tile", 8192))}
    with pytest.raises(UsageError, match=r"nothing to tune: every tile is fixed \(batch_tile=2"):
        space(DEFAULTS, fixed)
    with pytest.raises(UsageError, match="tile fields only"):
        space(DEFAULTS, {"n_embd": [128, 256]})


def test_feasible_keeps_what_the_check_accepts():
    sp = space(DEFAULTS, {"inner_tile": [256, 512, 1024], "batch_tile": [8], "head_tile": [2],
                          "vocab_tile": [4096]})

    def check(spec):
        if spec.inner_tile > 256:
            raise ValueError(f"inner_tile={spec.inner_tile}: over the cap")
    fits, pruned = feasible(sp, check)
    assert [s.inner_tile for s in fits] == [256]
    assert [(s.inner_tile, why) for s, why in pruned] == [
        (512, "inner_tile=512: over the cap"), (1024, "inner_tile=1024: over the cap")]
