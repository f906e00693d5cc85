"""The default corpus: the standard library's sources, split by file, cached."""

import pytest

from nntile_lab.data import corpus, load_split, read_meta
from nntile_lab.data.corpus import (
    default_cache_dir,
    default_corpus_files,
    prepare_default_corpus,
    stdlib_dir,
)
from nntile_lab.data.prepare import encode_files

SMALL = 150_000  # bytes: a handful of files, tokenised in well under a second


def test_files_are_sorted_stdlib_sources_without_tests():
    root = stdlib_dir()
    files = default_corpus_files(None)
    rel = [f.relative_to(root).as_posix() for f in files]
    assert rel == sorted(rel) and len(rel) > 100
    assert "os.py" in rel and "json/decoder.py" in rel
    assert all(r.endswith(".py") for r in rel)
    banned = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
    assert not any(banned & set(r.split("/")[:-1]) for r in rel)


def test_max_bytes_takes_a_prefix_just_reaching_the_cap():
    everything = default_corpus_files(None)
    some = default_corpus_files(SMALL)
    assert some == everything[: len(some)]
    sizes = [f.stat().st_size for f in some]
    assert sum(sizes) >= SMALL > sum(sizes[:-1])
    assert len(default_corpus_files(1)) == 1


def test_prepare_splits_by_file_and_caches(tmp_path, monkeypatch):
    out = prepare_default_corpus(tmp_path / "c", max_bytes=SMALL)
    assert out == tmp_path / "c"
    meta = read_meta(out)
    files = default_corpus_files(SMALL)
    n_val = meta["val_files"]
    assert n_val == max(1, round(len(files) * corpus.VAL_FILE_FRACTION))
    assert meta["train_files"] + n_val == len(files)
    # Exact tokens: each training file then <|endoftext|>; validation = the last files only.
    assert load_split(out, "train").tokens.tolist() == encode_files(files[:-n_val]).tolist()
    assert load_split(out, "val").tokens.tolist() == encode_files(files[-n_val:]).tolist()
    assert meta["source"] == "python-stdlib" and meta["max_bytes"] == SMALL

    monkeypatch.setattr(corpus, "encode_files", lambda files: pytest.fail("re-tokenised"))
    assert prepare_default_corpus(out, max_bytes=SMALL) == out


def test_too_small_corpus_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="max_bytes=1 selects 1"):
        prepare_default_corpus(tmp_path, max_bytes=1)


def test_default_cache_dir_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    d = default_cache_dir()
    assert d.parent == tmp_path / "nntile_lab" and d.name.startswith("stdlib-py3.")
