"""The sgemm peak's cache: a rate observed above the cached peak (measured while the cores
were busy) makes it measured again, and the higher figure is kept — for a trace's and a
sweep's MFU alike."""
import json

from nntile_lab import peak, sweep
from nntile_lab.spec import ExperimentSpec


def _fake_measure(monkeypatch, rates: list) -> list:
    calls = []

    def measure():
        calls.append(rates[0])
        return {"gflops": rates.pop(0), "method": "test", "blas_threads": 2, "measured": "now"}
    monkeypatch.setattr(peak, "measure", measure)
    return calls


def test_a_rate_above_the_cached_peak_measures_again(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path))
    calls = _fake_measure(monkeypatch, [50.0, 300.0, 200.0])
    assert peak.peak_gflops() == 50.0 and calls == [50.0]            # first use: measured
    assert peak.peak_gflops(at_least=40.0) == 50.0 and calls == [50.0]  # plausible: cached
    assert peak.peak_gflops(at_least=120.0) == 300.0                 # impossible: again
    assert peak.peak_gflops() == 300.0 and len(calls) == 2           # and kept
    assert peak.peak_gflops(at_least=400.0) == 300.0 and len(calls) == 3   # 200 < 300: kept
    cached = json.loads((tmp_path / "peak.json").read_text())
    assert [e["gflops"] for e in cached.values()] == [300.0]


def test_a_sweep_faster_than_the_cached_peak_recomputes_mfu(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTILE_LAB_CACHE", str(tmp_path / "cache"))
    _fake_measure(monkeypatch, [1e-3, 1e4])      # a peak far too low, then a plausible one
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                          warmup_steps=1, measure_steps=2, ncpu=2)
    df = sweep.run([spec], tmp_path / "points", isolate=False, progress=False)
    row = df.iloc[0]
    assert row["peak_gflops"] == 1e4 and row["mfu"] == row["gflops"] / 1e4
    assert any("peak measured again" in m for m in df.attrs["messages"])
