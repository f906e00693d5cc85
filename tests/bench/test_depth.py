"""``nntile-lab bench depth``: its points, the per-repeat ratio on hand-made rows, and a
tiny end-to-end run in memory and out of core."""
import json

import numpy as np
import pandas as pd
import pytest

from nntile_lab import memory
from nntile_lab.bench import depth
from nntile_lab.cli import main
from nntile_lab.spec import ExperimentSpec

TINY = ["--n-embd", "128", "--n-head", "2", "--vocab-size", "8192", "--seq-len", "64",
        "--batch", "8", "--vocab-tile", "1024", "--inner-tile", "256", "--measure-steps", "2"]
TINY_SPEC = ExperimentSpec(n_embd=128, n_head=2, vocab_size=8192, seq_len=64, batch=8,
                           vocab_tile=1024, inner_tile=256, measure_steps=2)


def test_points_interleave_depths_and_cap_each_at_its_own_peak(tmp_path):
    pts = depth.points(TINY_SPEC, (1, 2), repeats=2, ooc_fraction=0.5, ooc_dir=str(tmp_path))
    assert [(p.seed, p.n_layer, p.memory_limit_mb is None) for p in pts] == [
        (s, n, m) for s in (0, 1) for n in (1, 2) for m in (True, False)]
    for p in pts:
        if p.memory_limit_mb is not None:
            peak = memory.estimate(p.replace(memory_limit_mb=None, ooc_dir=None)).peak_bytes
            assert p.memory_limit_mb < peak / 2**20 and p.ooc_dir == str(tmp_path)
    caps = {p.n_layer: p.memory_limit_mb for p in pts if p.memory_limit_mb}
    assert caps[2] > caps[1]                         # the deeper model's own (larger) peak
    assert all(p.memory_limit_mb is None for p in depth.points(TINY_SPEC, (1, 2), 1, None))
    for bad in [(8, 4), (4,), (0, 4), (4, 4)]:
        with pytest.raises(ValueError, match="two depths, shallow first"):
            depth.points(TINY_SPEC, bad)
    with pytest.raises(ValueError, match="repeats=0"):
        depth.points(TINY_SPEC, repeats=0)


def test_ratio_pairs_the_depths_within_each_repeat():
    rng = np.random.default_rng(0)
    rows, want = [], {}
    for cap in (None, 100.0):
        ratios = []
        for seed in range(5):
            shallow = rng.uniform(50, 200)      # a noisy machine: the level moves per repeat
            r = rng.uniform(0.8, 1.1)
            ratios.append(r)
            for n, g in ((4, shallow), (8, shallow * r)):
                rows.append({"memory_limit_mb": cap, "n_layer": n, "seed": seed, "gflops": g,
                             "step_time_s": 1 / g, "idle_share": 0.1, "error": None})
        want["in memory" if cap is None else "out of core"] = ratios
    got = depth.summarize(pd.DataFrame(rows))
    for mode, ratios in want.items():
        deep = got[(got["mode"] == mode) & (got["n_layer"] == 8)].iloc[0]
        assert deep["ratio"] == pytest.approx(np.median(ratios))
        assert (deep["ratio_min"], deep["ratio_max"]) == pytest.approx((min(ratios),
                                                                        max(ratios)))
        assert got[(got["mode"] == mode) & (got["n_layer"] == 4)]["ratio"].isna().all()


def test_cli_runs_both_modes(tmp_path, capsys):
    rc = main(["bench", "depth", *TINY, "--layers", "1,2", "--repeats", "1", "--ooc-dir",
               str(tmp_path / "ooc"), "--in-process", "--no-progress", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(res["summary"])
    assert rows["error"].isna().all(), rows["error"].tolist()
    assert list(zip(rows["mode"], rows["n_layer"])) == [
        ("in memory", 1), ("out of core", 1), ("in memory", 2), ("out of core", 2)]
    assert (rows["gflops"] > 0).all() and rows["idle"].between(0, 1).all()
    deep = rows[rows["n_layer"] == 2]
    assert deep["ratio"].between(0.1, 10).all()     # measured, not a constant
    assert len(res["points"]) == 4
    assert main(["bench", "depth", *TINY, "--layers", "2,1"]) == 2     # a usage error
    assert "two depths, shallow first" in capsys.readouterr().err
    # nothing measured (every point fails): the work failed, exit 1; its rows say why
    assert main(["bench", "depth", *TINY, "--layers", "1,2", "--repeats", "1", "--no-ooc",
                 "--scheduler", "nosuch", "--in-process", "--no-progress", "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)["summary"]
    assert rows and all(r["error"] for r in rows)
