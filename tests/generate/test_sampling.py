"""The sampler: the distribution it draws from (against Hugging Face's logits warpers), the
draws' frequencies against that distribution (a chi-square test with fixed seeds),
reproducibility and refusals."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from nntile_lab.generate.sampling import Sampler, Sampling, probabilities


def hf_probabilities(logits: np.ndarray, s: Sampling) -> np.ndarray:
    """Hugging Face's warpers in their generate order (temperature, top-k, top-p), float64."""
    z = torch.from_numpy(np.asarray(logits, np.float64))
    ids = torch.zeros((z.shape[0], 1), dtype=torch.long)
    z = TemperatureLogitsWarper(s.temperature)(ids, z)
    if s.top_k is not None:
        z = TopKLogitsWarper(s.top_k)(ids, z)
    if s.top_p is not None:
        z = TopPLogitsWarper(s.top_p)(ids, z)
    return torch.softmax(z, dim=-1).numpy()


@st.composite
def settings_and_logits(draw):
    V = draw(st.integers(1, 40))
    B = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # some rows with tied values: top-k keeps ties at the k-th value
    logits = rng.standard_normal((B, V)) * draw(st.sampled_from([0.1, 1.0, 5.0]))
    if draw(st.booleans()):
        logits = np.round(logits, 0)
    s = Sampling(temperature=draw(st.sampled_from([0.3, 0.7, 1.0, 1.5])),
                 top_k=draw(st.one_of(st.none(), st.integers(1, V + 2))),
                 top_p=draw(st.one_of(st.none(), st.sampled_from([0.05, 0.5, 0.9, 1.0]))))
    return logits.astype(np.float32), s


@given(settings_and_logits())
def test_distribution_is_hugging_faces(case):
    """The same distribution: the same tokens with the same probabilities — except that
    among tokens of EQUAL logits, which of them a top-k or top-p cut keeps is an artefact of
    the sort (ours by index, PyTorch's unstable ``sort``): there the kept logit values and
    their probabilities must agree, whichever of the tied tokens carry them."""
    logits, s = case
    got = probabilities(logits, s)
    want = hf_probabilities(logits, s)
    assert np.allclose(got.sum(-1), 1.0)
    for row, g, w in zip(logits, got, want):
        if np.array_equal(g > 0, w > 0):
            assert np.allclose(g, w, rtol=1e-9, atol=1e-12)
            continue
        differ = (g > 0) != (w > 0)
        # only tied tokens may swap: every differing token's logit is also kept on both sides
        assert np.isin(row[differ], row[(g > 0) & (w > 0)]).all() or \
            len(set(row[differ])) == 1, (row, g, w)
        assert np.allclose(np.sort(row[g > 0]), np.sort(row[w > 0]))
        assert np.allclose(np.sort(g[g > 0]), np.sort(w[w > 0]), rtol=1e-9, atol=1e-12)


def chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """Pearson's goodness-of-fit p-value of ``counts`` against probabilities ``p`` (over the
    tokens of mass > 0; bins with expected counts under 5 pooled into one)."""
    n = counts.sum()
    expected = n * p
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = len(obs) - 1
    if df < 1:
        return 1.0
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


CASES = [Sampling(temperature=1.0), Sampling(temperature=0.5), Sampling(temperature=2.0),
         Sampling(top_k=4), Sampling(top_p=0.8), Sampling(temperature=0.8, top_k=6, top_p=0.9)]


@pytest.mark.parametrize("s", CASES, ids=lambda s: s.describe())
def test_frequencies_match_the_softmax(s):
    """20 000 draws (fixed seeds: the same draws every run) from one row of 12 logits: the
    frequencies fit the distribution the sampler states (chi-square p > 0.001), and tokens
    outside it are never drawn."""
    logits = np.random.default_rng(7).standard_normal((1, 12)).astype(np.float32) * 1.5
    p = probabilities(logits, s)[0]
    sampler = Sampler(s, seed=1234)
    draws = np.array([sampler(logits)[0] for _ in range(20_000)])
    counts = np.bincount(draws, minlength=12)
    assert counts[p == 0].sum() == 0
    assert chi_square_p(counts, p) > 1e-3


def test_frequency_test_rejects_another_temperature():
    """The same test, pointed at the wrong distribution, rejects it: it has power."""
    logits = np.random.default_rng(7).standard_normal((1, 12)).astype(np.float32) * 1.5
    sampler = Sampler(Sampling(temperature=0.7), seed=1234)
    draws = np.array([sampler(logits)[0] for _ in range(20_000)])
    counts = np.bincount(draws, minlength=12)
    assert chi_square_p(counts, probabilities(logits, Sampling(temperature=1.0))[0]) < 1e-6


@given(st.integers(0, 2**32 - 1))
def test_seeded_draws_are_reproducible_and_per_row(seed):
    logits = np.random.default_rng(seed).standard_normal((3, 50)).astype(np.float32)
    s = Sampling(temperature=1.3, top_p=0.95)
    a = [Sampler(s, seed)(logits) for _ in range(2)]
    assert np.array_equal(a[0], a[1])
    seq1 = Sampler(s, seed)
    seq2 = Sampler(s, seed)
    first = [seq1(logits) for _ in range(20)]
    # row 1 alone, told it is row 1: the same tokens as in the batch
    second = [seq2(logits[1:2], rows=[1])[0] for _ in range(20)]
    assert [f[1] for f in first] == second
    other = Sampler(s, seed + 1)
    assert any(not np.array_equal(f, other(logits)) for f in first)


def test_greedy_takes_the_first_largest():
    logits = np.array([[0.0, 3.0, 3.0, 1.0], [5.0, -1.0, 5.0, 5.0]], np.float32)
    assert Sampler(Sampling(greedy=True))(logits).tolist() == [1, 0]
    assert np.array_equal(probabilities(logits, Sampling(greedy=True)),
                          [[0, 1, 0, 0], [1, 0, 0, 0]])


@pytest.mark.parametrize("kw,match", [
    ({"temperature": 0}, r"temperature=0 must be a finite number > 0 for sampling"),
    ({"temperature": -1.0}, r"temperature=-1.0 must be"),
    ({"temperature": float("nan")}, r"temperature=nan"),
    ({"top_k": 0}, r"top_k=0 must be an integer ≥ 1"),
    ({"top_k": 2.5}, r"top_k=2.5 must be an integer"),
    ({"top_p": 0.0}, r"top_p=0.0 must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p=1.5 must be in \(0, 1\]"),
])
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        Sampling(**kw)
    Sampling(greedy=True, **kw)   # greedy uses none of them


def test_non_finite_logits_and_bad_seed_are_refused():
    with pytest.raises(FloatingPointError, match=r"logits\[0, 2\] = nan"):
        Sampler(Sampling())(np.array([[0.0, 1.0, np.nan]]))
    with pytest.raises(ValueError, match="seed=-1 must be an integer ≥ 0"):
        Sampler(Sampling(), seed=-1)
