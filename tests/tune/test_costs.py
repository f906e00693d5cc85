"""Per-codelet time models: fitted from measured tasks (a known linear model is recovered),
the prior's shape kept where a codelet was seen at too few sizes."""
import numpy as np
import pandas as pd
import pytest

from nntile_lab.tune.costs import CostModel, samples_from_tasks


def test_a_linear_codelet_model_is_recovered_from_noisy_samples():
    rng = np.random.default_rng(7)
    # distinct sizes where the latency is a visible share of a task (1 % noise)
    flops = rng.permutation(np.arange(1, 41)).astype(float) * 1e4
    nbytes = rng.permutation(np.arange(1, 41)).astype(float) * 1e3
    true = 12.0 + flops / 20e3 + nbytes / 5e3          # 12 µs, 20 GFLOP/s, 5 GB/s
    noise = 1 + 0.01 * rng.standard_normal(40)
    tasks = pd.DataFrame({"name": "gemm", "flops": np.repeat(flops, 3),
                          "bytes": np.repeat(nbytes, 3),
                          "duration_us": np.repeat(true * noise, 3)})
    samples = samples_from_tasks(tasks)
    assert len(samples) == 40 and (samples["count"] == 3).all()
    m = CostModel(prior_gflops=100.0).fit(samples)
    c = m.codelet("gemm")
    assert c.latency == pytest.approx(12.0, rel=0.3)
    assert 1e-3 / c.per_flop == pytest.approx(20.0, rel=0.03)
    assert 1e-3 / c.per_byte == pytest.approx(5.0, rel=0.1)
    got = m.time_us(["gemm"] * 40, flops, nbytes)
    assert np.allclose(got, true, rtol=0.03)
    assert list(m.table()["op"]) == ["gemm"] and m.table()["samples"].iloc[0] == 120


def test_few_sizes_keep_the_priors_shape_scaled_to_the_measurement():
    m = CostModel(prior_gflops=50.0)
    prior = m.codelet("gelu")            # memory-bound: latency + bytes / bandwidth
    assert prior.per_flop == 0 and prior.per_byte > 0
    samples = pd.DataFrame({"op": ["gelu"], "flops": [1e6], "bytes": [4e6],
                            "mean_us": [300.0], "count": [10]})
    fitted = m.fit(samples).codelet("gelu")
    assert fitted.time_us(1e6, 4e6) == pytest.approx(300.0)
    ratio = fitted.time_us(1e6, 8e6) / prior.time_us(1e6, 8e6)
    assert ratio == pytest.approx(300.0 / prior.time_us(1e6, 4e6))
    # a codelet never measured keeps its prior; a product's prior follows its FLOPs
    assert m.fit(samples).codelet("gemm").per_flop == pytest.approx(1 / 50e3)
