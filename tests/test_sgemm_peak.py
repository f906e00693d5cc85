"""The one sgemm peak behind every MFU: best of short trials in rounds apart (a neighbour's
burst cannot cover them all), cached per CPU, BLAS threads and BLAS, measured again when a
run is faster than it — and the number ``bench train``, the sweeps and ``nntile-lab trace``
divide by."""
import json
import time

import pytest

from nntile_lab import sgemm_peak, sweep
from nntile_lab.bench import train as bench_train
from nntile_lab.spec import ExperimentSpec

TINY = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=2, ncpu=2)


def _fake_measure(monkeypatch, rates: list) -> list:
    calls = []

    def measure():
        calls.append(rates[0])
        return {"gflops": rates.pop(0), "method": "test", "blas_threads": 2, "measured": "now"}
    monkeypatch.setattr(sgemm_peak, "measure", measure)
    return calls


def test_a_rate_above_the_cached_peak_measures_again(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path))
    calls = _fake_measure(monkeypatch, [50.0, 300.0, 200.0])
    assert sgemm_peak.gflops() == 50.0 and calls == [50.0]              # first use: measured
    assert sgemm_peak.gflops(at_least=40.0) == 50.0 and calls == [50.0]  # plausible: cached
    assert sgemm_peak.gflops(at_least=120.0) == 300.0                   # impossible: again
    assert sgemm_peak.gflops() == 300.0 and len(calls) == 2             # and kept
    assert sgemm_peak.gflops(at_least=400.0) == 300.0 and len(calls) == 3  # 200 < 300: kept
    cached = json.loads((tmp_path / "sgemm_peak.json").read_text())
    assert [e["gflops"] for e in cached.values()] == [300.0]


def test_the_cache_is_per_blas_thread_count(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path))
    _fake_measure(monkeypatch, [100.0, 60.0])
    monkeypatch.setattr(sgemm_peak, "cores", lambda: 2)
    two = sgemm_peak.machine_key()
    assert sgemm_peak.gflops() == 100.0
    monkeypatch.setattr(sgemm_peak, "cores", lambda: 1)
    one = sgemm_peak.machine_key()
    assert one != two and "1 threads" in one and "2 threads" in two
    assert sgemm_peak.gflops() == 60.0          # its own entry, measured on its own
    cached = json.loads((tmp_path / "sgemm_peak.json").read_text())
    assert {k: v["gflops"] for k, v in cached.items()} == {two: 100.0, one: 60.0}


def test_a_noisy_neighbour_does_not_lower_the_peak():
    """A neighbour slows every trial of the first round and the first two of the second
    (what a median of five back to back would report); the peak is the unslowed rate."""
    quiet_s, busy_s, n = 0.004, 0.02, [0]

    def trial():
        n[0] += 1
        time.sleep(busy_s if n[0] <= 6 else quiet_s)
    best, times = sgemm_peak.best_of_rounds(trial, trials=4, rounds=3, pause_s=0.01)
    assert len(times) == 12
    assert quiet_s <= best < busy_s / 2
    assert sorted(times)[len(times) // 2] >= quiet_s      # the median would have lost more
    with pytest.raises(ValueError, match="trials=0"):
        sgemm_peak.best_of_rounds(trial, trials=0)


def test_the_measurement_is_a_rate_and_its_best():
    res = sgemm_peak.measure(n=256, trials=2, rounds=2, pause_s=0.01)
    assert res["gflops"] > 0.1 and "N=256" in res["method"]
    assert res["gflops"] >= res["median_gflops"] > 0


def test_bench_train_divides_by_the_cached_peak(tmp_path, monkeypatch):
    """``bench train`` no longer times its own matmuls: its MFU uses the one cached peak."""
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path))
    calls = _fake_measure(monkeypatch, [1e4])
    res = bench_train.run(TINY, vs_torch=False)
    assert calls == [1e4] and res["peak_gflops"] == 1e4
    assert res["nntile_mfu"] == pytest.approx(res["nntile_gflops"] / 1e4)
    assert sgemm_peak.gflops() == 1e4 and calls == [1e4]     # the same entry, cached


def test_a_sweep_faster_than_the_cached_peak_recomputes_mfu(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path / "cache"))
    _fake_measure(monkeypatch, [1e-3, 1e4])      # a peak far too low, then a plausible one
    df = sweep.run([TINY], tmp_path / "points", isolate=False, progress=False)
    row = df.iloc[0]
    assert row["peak_gflops"] == 1e4 and row["mfu"] == row["gflops"] / 1e4
    assert any("peak measured again" in m for m in df.attrs["messages"])
