"""``nntile-lab bench depth``: its points, the per-repeat ratio on hand-made rows, and a
tiny end-to-end run in memory and out of core."""
import json

import numpy as np
import pandas as pd
import pytest

from nntile_lab import memory
from nntile_lab.bench import depth
from nntile_lab.cli import main
from nntile_lab.plots import depth as depth_plots
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
    for bad in [(8, 4), (4,), (0, 4), (4, 4), (4, 12, 8), (4, 12, 12)]:
        with pytest.raises(ValueError, match="two or more depths"):
            depth.points(TINY_SPEC, bad)
    three = depth.points(TINY_SPEC, (1, 2, 3), repeats=1, ooc_fraction=None)
    assert [p.n_layer for p in three] == [1, 2, 3]
    with pytest.raises(ValueError, match="repeats=0"):
        depth.points(TINY_SPEC, repeats=0)


def test_ratio_pairs_every_depth_with_the_shallowest_within_each_repeat():
    rng = np.random.default_rng(0)
    rows, want = [], {}
    for cap in (None, 100.0):
        ratios = {8: [], 16: []}
        for seed in range(5):
            shallow = rng.uniform(50, 200)      # a noisy machine: the level moves per repeat
            for n in (4, 8, 16):
                r = 1.0 if n == 4 else rng.uniform(0.8, 1.1)
                if n != 4:
                    ratios[n].append(r)
                rows.append({"memory_limit_mb": cap, "n_layer": n, "seed": seed,
                             "gflops": shallow * r, "step_time_s": 0.01 * n / r,
                             "idle_share": 0.01 * n, "critical_path_s": 0.002 * n,
                             "critical_path_ratio": 0.2, "tasks_per_step": 100 * n,
                             "error": None})
        want["in memory" if cap is None else "out of core"] = ratios
    # a failed deeper point leaves its repeat out of that depth's ratio only
    rows[-1] = rows[-1] | {"gflops": None, "error": "killed"}
    want["out of core"][16].pop()
    got = depth.summarize(pd.DataFrame(rows))
    assert list(zip(got["mode"], got["n_layer"])) == [
        (m, n) for m in ("in memory", "out of core") for n in (4, 8, 16)]
    for mode, per in want.items():
        for n, ratios in per.items():
            deep = got[(got["mode"] == mode) & (got["n_layer"] == n)].iloc[0]
            assert deep["ratio"] == pytest.approx(np.median(ratios))
            assert (deep["ratio_min"], deep["ratio_max"]) == pytest.approx((min(ratios),
                                                                            max(ratios)))
            assert deep["idle"] == pytest.approx(0.01 * n)
            assert deep["critical_path_ms"] == pytest.approx(2.0 * n)
            assert deep["tasks_per_step"] == pytest.approx(100 * n)
        assert got[(got["mode"] == mode) & (got["n_layer"] == 4)]["ratio"].isna().all()
    text = depth.table(got)
    assert text.count("reference") == 2 and "| out of core | 16 | 100 |" in text


def test_a_failed_reference_gives_no_ratio_and_the_table_says_why():
    rows = [{"memory_limit_mb": None, "n_layer": n, "seed": 0, "gflops": g,
             "step_time_s": 1.0, "idle_share": 0.1, "error": e}
            for n, g, e in ((4, None, "did not fit"), (12, 100.0, None))]
    got = depth.summarize(pd.DataFrame(rows))
    assert got["ratio"].isna().all()
    assert "failed: did not fit" in depth.table(got)
    fig = depth_plots.figure(got)                     # draws with a failed depth
    assert len(fig.axes) == 2


def test_cli_runs_both_modes(tmp_path, capsys):
    rc = main(["bench", "depth", *TINY, "--layers", "1,2,3", "--repeats", "1", "--ooc-dir",
               str(tmp_path / "ooc"), "--in-process", "--no-progress", "--json",
               "--out", str(tmp_path / "out"), "--traces", "--cache", str(tmp_path / "c")])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(res["summary"])
    assert rows["error"].isna().all(), rows["error"].tolist()
    assert list(zip(rows["mode"], rows["n_layer"])) == [
        (m, n) for m in ("in memory", "out of core") for n in (1, 2, 3)]
    assert (rows["gflops"] > 0).all() and rows["idle"].between(0, 1).all()
    assert rows["critical_path_share"].between(0, 1).all()
    assert (rows["critical_path_ms"] > 0).all()
    assert (rows["critical_path_ms"] < rows["step_ms"]).all()
    tasks = rows[rows["mode"] == "in memory"]["tasks_per_step"].tolist()
    assert tasks[0] < tasks[1] < tasks[2]       # every layer adds its tasks
    deep = rows[rows["n_layer"] > 1]
    assert deep["ratio"].between(0.1, 10).all()     # measured, not a constant
    assert len(res["points"]) == 6
    ph = pd.DataFrame(res["phases"])                # from each point's saved trace
    assert list(zip(ph["mode"], ph["n_layer"])) == list(zip(rows["mode"], rows["n_layer"]))
    parts = ph[["fwd_bwd_share", "norm_share", "optimizer_share"]].sum(axis=1)
    assert parts.to_numpy() == pytest.approx(1.0)
    assert (ph["step_ms"] > 0).all()
    assert "gradient-norm tail" in depth.phase_table(ph)
    mix = ph[[c for c in ph if c.endswith("_task_share")]]
    assert mix.sum(axis=1).to_numpy() == pytest.approx(1.0)    # every task counted once
    assert (mix["block_gemm_task_share"] > 0).all() and (ph["head_gemm_gflops"] > 0).all()
    assert "block GEMMs" in depth.mix_table(ph)
    for name in ("depth.png", "depth.md", "depth.json"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert (tmp_path / "out" / "depth.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["bench", "depth", *TINY, "--layers", "2,1"]) == 2     # a usage error
    assert "shallowest first" in capsys.readouterr().err
    # a policy StarPU does not have: a usage error before any point runs (exit 2)
    assert main(["bench", "depth", *TINY, "--layers", "1,2", "--repeats", "1", "--no-ooc",
                 "--scheduler", "nosuch", "--in-process", "--no-progress", "--json"]) == 2
    assert "--scheduler" in capsys.readouterr().err


def test_default_run_is_gpt2_small_width():
    base = depth.default_base()
    assert (base.n_embd, base.n_head, base.seq_len, base.batch) == (768, 12, 256, 4)
    assert depth.LAYERS == (4, 12, 24, 36)
