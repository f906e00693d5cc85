"""Per-codelet time models: fitted from measured tasks (a known linear model is recovered),
the prior's shape kept where a codelet was seen at too few sizes."""
import numpy as np
import pandas as pd
import pytest

from nntile_lab.tune.costs import CostModel, samples_from_tasks


@pytest.mark.parametrize("op, work, rate", [("gemm", "flops", 20e3), ("gelu", "bytes", 5e3)])
def test_a_codelets_latency_and_rate_are_recovered_from_noisy_samples(op, work, rate):
    """A product's time follows its FLOPs, another codelet's its bytes: 12 µs + work/rate
    (20 GFLOP/s, 5 GB/s) with 1 % noise, over sizes spanning 40×."""
    rng = np.random.default_rng(7)
    x = rng.permutation(np.arange(1, 41)).astype(float) * (1e4 if work == "flops" else 1e3)
    other = np.full(40, 1e3)
    true = 12.0 + x / rate
    tasks = pd.DataFrame({"name": op, "flops": np.repeat(x if work == "flops" else other, 3),
                          "bytes": np.repeat(other if work == "flops" else x, 3),
                          "duration_us": np.repeat(true * (1 + 0.01 * rng.standard_normal(40)),
                                                   3)})
    samples = samples_from_tasks(tasks)
    assert len(samples) == 40 and (samples["count"] == 3).all()
    m = CostModel(prior_gflops=100.0).fit(samples)
    c = m.codelet(op)
    assert c.latency == pytest.approx(12.0, rel=0.3)
    per = c.per_flop if work == "flops" else c.per_byte
    assert 1 / per == pytest.approx(rate, rel=0.03)
    assert (c.per_byte if work == "flops" else c.per_flop) == 0
    flops, nbytes = (x, other) if work == "flops" else (other, x)
    assert np.allclose(m.time_us([op] * 40, flops, nbytes), true, rtol=0.03)
    assert list(m.table()["op"]) == [op] and m.table()["samples"].iloc[0] == 120


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


def test_a_products_cost_per_byte_is_fitted_where_its_shapes_vary():
    """Skinny products move more bytes per FLOP: with FLOPs and bytes varying apart, a
    product's model keeps a cost per byte beside its rate."""
    rng = np.random.default_rng(11)
    flops = rng.permutation(np.arange(1, 31)).astype(float) * 1e5
    nbytes = rng.permutation(np.arange(1, 31)).astype(float) * 4e3
    true = 5.0 + flops / 20e3 + nbytes / 2e3
    tasks = pd.DataFrame({"name": "gemm", "flops": flops, "bytes": nbytes,
                          "duration_us": true * (1 + 0.005 * rng.standard_normal(30))})
    c = CostModel(prior_gflops=100.0).fit(samples_from_tasks(tasks)).codelet("gemm")
    assert 1 / c.per_flop == pytest.approx(20e3, rel=0.05)
    assert 1 / c.per_byte == pytest.approx(2e3, rel=0.1)
