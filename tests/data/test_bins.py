"""uint16 token files: atomic writes, validation, random and sequential batches."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab.data import bins
from nntile_lab.data.bins import TokenBin, load_split, write_tokens


def arange_bin(tmp_path, n, name="train.bin"):
    """A file whose token i is i, so every window reveals exactly where it came from."""
    return TokenBin(write_tokens(tmp_path / name, np.arange(n)))


def test_write_read_round_trip(tmp_path):
    tokens = [0, 1, 50256, 65535, 7]
    path = write_tokens(tmp_path / "sub" / "x.bin", tokens)
    assert path.stat().st_size == 2 * len(tokens)
    assert np.fromfile(path, dtype=np.uint16).tolist() == tokens
    tb = TokenBin(path)
    assert len(tb) == 5 and tb.tokens.tolist() == tokens
    assert os.listdir(path.parent) == ["x.bin"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("tokens", "error", "needle"),
    [([1, 65536], ValueError, "65536"), ([-1, 2], ValueError, "-1"),
     ([1.5], TypeError, "float64"), ([[1, 2]], ValueError, "(1, 2)")],
)
def test_write_rejects_bad_tokens(tmp_path, tokens, error, needle):
    with pytest.raises(error, match=needle.replace("(", r"\(").replace(")", r"\)")):
        write_tokens(tmp_path / "x.bin", tokens)
    assert not list(tmp_path.iterdir())


def test_failed_write_keeps_old_file(tmp_path, monkeypatch):
    path = write_tokens(tmp_path / "x.bin", [1, 2, 3])

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(bins.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_tokens(path, [9] * 100)
    assert np.fromfile(path, dtype=np.uint16).tolist() == [1, 2, 3]
    assert os.listdir(tmp_path) == ["x.bin"]


def test_missing_file_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="nntile-lab prepare") as e:
        TokenBin(tmp_path / "nope.bin")
    assert str(tmp_path / "nope.bin") in str(e.value)


@pytest.mark.parametrize(("content", "size"), [(b"", 0), (b"abc", 3)])
def test_empty_or_odd_file_rejected(tmp_path, content, size):
    path = tmp_path / "bad.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"has {size} bytes") as e:
        TokenBin(path)
    assert str(path) in str(e.value) and "nntile-lab prepare" in str(e.value)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 300), batch=st.integers(1, 9), seq_len=st.integers(1, 40),
       seed=st.integers(0, 2**32 - 1))
def test_sample_batch_windows_and_shift(tmp_path_factory, n, batch, seq_len, seed):
    tb = arange_bin(tmp_path_factory.mktemp("b"), n)
    if n < seq_len + 1:
        with pytest.raises(ValueError, match=f"holds {n} tokens, fewer than the {seq_len + 1}"):
            tb.sample_batch(batch, seq_len, np.random.default_rng(seed))
        return
    x, y = tb.sample_batch(batch, seq_len, np.random.default_rng(seed))
    assert x.shape == y.shape == (batch, seq_len)
    assert x.dtype == y.dtype == np.int64
    assert x.flags.c_contiguous and y.flags.c_contiguous
    # Each row is the contiguous window starting at its first token, labels one ahead.
    np.testing.assert_array_equal(x, x[:, :1] + np.arange(seq_len))
    np.testing.assert_array_equal(y, x + 1)
    assert x.min() >= 0 and y.max() <= n - 1


def test_sampling_reaches_both_ends(tmp_path):
    tb = arange_bin(tmp_path, 12)
    x, y = tb.sample_batch(2000, 4, np.random.default_rng(0))
    assert set(x[:, 0].tolist()) == set(range(12 - 4))  # starts 0 .. n - seq_len - 1
    assert y.max() == 11


def test_sampling_is_reproducible_and_resumable(tmp_path):
    tb = arange_bin(tmp_path, 1000)
    rng = np.random.default_rng(1234)
    first = tb.sample_batch(4, 8, rng)
    saved = rng.bit_generator.state
    second = tb.sample_batch(4, 8, rng)

    again = np.random.default_rng(1234)
    np.testing.assert_array_equal(tb.sample_batch(4, 8, again)[0], first[0])
    resumed = np.random.default_rng(0)
    resumed.bit_generator.state = saved
    np.testing.assert_array_equal(tb.sample_batch(4, 8, resumed)[0], second[0])
    assert not np.array_equal(first[0], second[0])


def test_sample_batch_argument_errors(tmp_path):
    tb = arange_bin(tmp_path, 100)
    with pytest.raises(TypeError, match="RandomState"):
        tb.sample_batch(2, 4, np.random.RandomState(0))
    with pytest.raises(ValueError, match="batch must be a positive integer, got 0"):
        tb.sample_batch(0, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="seq_len must be a positive integer, got 2.5"):
        tb.sample_batch(2, 2.5, np.random.default_rng(0))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 300), batch=st.integers(1, 5), seq_len=st.integers(1, 20))
def test_sequential_batches_tile_the_file(tmp_path_factory, n, batch, seq_len):
    tb = arange_bin(tmp_path_factory.mktemp("s"), n)
    if n < batch * seq_len + 1:
        with pytest.raises(ValueError, match=f"holds {n} tokens"):
            tb.sequential_batches(batch, seq_len)
        return
    out = list(tb.sequential_batches(batch, seq_len))
    assert len(out) == tb.num_sequential_batches(batch, seq_len) == (n - 1) // seq_len // batch
    inputs = np.concatenate([x for x, _ in out]).ravel()
    labels = np.concatenate([y for _, y in out]).ravel()
    np.testing.assert_array_equal(inputs, np.arange(len(out) * batch * seq_len))
    np.testing.assert_array_equal(labels, inputs + 1)
    assert all(x.shape == (batch, seq_len) and x.dtype == np.int64 for x, _ in out)


def test_sequential_batches_cap_and_determinism(tmp_path):
    tb = arange_bin(tmp_path, 1001)
    assert tb.num_sequential_batches(2, 10) == 50
    capped = list(tb.sequential_batches(2, 10, max_batches=3))
    assert len(capped) == 3
    full = list(tb.sequential_batches(2, 10))[:3]
    for (a, b), (c, d) in zip(capped, full, strict=True):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    with pytest.raises(ValueError, match="max_batches must be >= 1 or None, got 0"):
        tb.sequential_batches(2, 10, max_batches=0)


def test_load_split(tmp_path):
    write_tokens(tmp_path / "train.bin", [1, 2, 3])
    write_tokens(tmp_path / "val.bin", [4, 5])
    assert load_split(tmp_path, "train").tokens.tolist() == [1, 2, 3]
    assert len(load_split(tmp_path, "val")) == 2
    with pytest.raises(ValueError, match="'test'"):
        load_split(tmp_path, "test")
    with pytest.raises(FileNotFoundError, match="val.bin"):
        load_split(tmp_path / "empty", "val")
