"""``bench tune`` compares tune with a sweep of the same grid: the sweep's points must not
hand tune their task times through StarPU's saved models (every runtime calibrates)."""
from __future__ import annotations

from nntile_lab import perfmodels, sweep
from nntile_lab.bench import tune as bench_tune
from nntile_lab.spec import ExperimentSpec

TINY = ExperimentSpec(n_layer=1, n_head=2, n_embd=64, vocab_size=512, seq_len=32, batch=4,
                      ncpu=2, warmup_steps=1, measure_steps=1)


def test_the_sweeps_models_stay_apart_from_the_ones_tune_reads(tmp_path, monkeypatch):
    home = tmp_path / "models"
    (home / "bus").mkdir(parents=True)
    (home / "bus" / "kept").write_text("the bus calibration")
    monkeypatch.setenv("STARPU_PERF_MODEL_DIR", str(home))
    apart = tmp_path / "apart"
    with bench_tune._models_apart(str(apart)):
        df = sweep.run(sweep.grid(TINY, vocab_tile=[256]), tmp_path / "sweep", progress=False,
                       keep_traces=False)
    assert (df["status"] == "fits").all(), df["error"].tolist()
    # the point's runtime recorded its tasks: in the folder apart, none where tune reads
    assert len(perfmodels.history(apart / "codelets" / "45")) > 0
    assert len(perfmodels.history()) == 0
    assert (apart / "bus" / "kept").read_text() == "the bus calibration"
    assert perfmodels.model_dir() == home / "codelets" / "45"
