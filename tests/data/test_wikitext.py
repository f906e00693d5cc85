"""WikiText-103 from a local raw or parquet copy, tokenised once and cached."""

import sys

import pytest

from nntile_lab.data import get_encoding, load_split, prepare_wikitext, read_meta
from nntile_lab.data import wikitext as wt
from nntile_lab.data.tokenizer import EOT
from tests.conftest import require

# The raw files' shape: a leading blank line, " = Heading = " lines, blank lines as " \n".
TRAIN = (" \n = Valkyria Chronicles III = \n \n Senjō no Valkyria 3 : Unrecorded Chronicles "
         "( Japanese : 戦場のヴァルキュリア3 ) is a tactical role @-@ playing video game . \n"
         " \n = = Gameplay = = \n \n It 's fought in 1 @,@ 000 battles . \n")
VALID = " \n = Robert Boulter = \n \n Robert Boulter is an English actor . \n"


def make_raw(root, name="wikitext-103-raw"):
    d = root / name
    d.mkdir(parents=True)
    (d / "wiki.train.raw").write_bytes(TRAIN.encode())
    (d / "wiki.valid.raw").write_bytes(VALID.encode())
    (d / "wiki.test.raw").write_bytes(b" \n = Test = \n")
    return d


def decoded(out, split):
    return get_encoding().decode(load_split(out, split).tokens.tolist())


def test_raw_layout_round_trip(tmp_path):
    make_raw(tmp_path / "src")
    meta = prepare_wikitext(tmp_path / "src", tmp_path / "out")
    assert decoded(tmp_path / "out", "train") == TRAIN + EOT
    assert decoded(tmp_path / "out", "val") == VALID + EOT
    assert meta["layout"] == "raw" and meta["source"] == "wikitext103"
    assert meta["train_tokens"] == len(get_encoding().encode_ordinary(TRAIN)) + 1
    assert meta == read_meta(tmp_path / "out")


def test_cache_is_reused_until_sources_change(tmp_path, monkeypatch):
    src = make_raw(tmp_path / "src")
    first = prepare_wikitext(tmp_path / "src", tmp_path / "out")

    def no_tokenising(*args, **kwargs):
        raise AssertionError("tokenised again although the cache matches")

    with monkeypatch.context() as m:
        m.setattr(wt, "encode_stream", no_tokenising)
        assert prepare_wikitext(tmp_path / "src", tmp_path / "out") == first

    (src / "wiki.valid.raw").write_text(" \n = Changed = \n")
    again = prepare_wikitext(tmp_path / "src", tmp_path / "out")
    assert again["fingerprint"] != first["fingerprint"]
    assert decoded(tmp_path / "out", "val") == " \n = Changed = \n" + EOT

    (tmp_path / "out" / "train.bin").write_bytes(b"\0\0")  # damaged: rebuilt, not trusted
    assert prepare_wikitext(tmp_path / "src", tmp_path / "out") == again
    assert decoded(tmp_path / "out", "train") == TRAIN + EOT


def test_prefers_wikitext_103_over_2(tmp_path):
    make_raw(tmp_path, "wikitext-2-raw")
    d103 = make_raw(tmp_path, "wikitext-103-raw")
    meta = prepare_wikitext(tmp_path, tmp_path / "out")
    assert meta["sources"] == [str(d103 / "wiki.train.raw"), str(d103 / "wiki.valid.raw")]


def test_missing_layout_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prepare_wikitext(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "src").mkdir()
    with pytest.raises(FileNotFoundError, match="wiki.train.raw.*validation-\\*.parquet"):
        prepare_wikitext(tmp_path / "src", tmp_path / "out")
    (tmp_path / "src" / "wiki.train.raw").write_text("x")
    with pytest.raises(FileNotFoundError, match="found \\['wiki.train.raw'\\]"):
        prepare_wikitext(tmp_path / "src", tmp_path / "out")
    a, b = tmp_path / "src" / "a", tmp_path / "src" / "b"
    for d in (a, b):
        d.mkdir()
        (d / "wiki.train.raw").write_text("x")
    with pytest.raises(ValueError, match="several wiki.train.raw"):
        prepare_wikitext(tmp_path / "src", tmp_path / "out")


def test_parquet_without_pyarrow_says_how_to_fix(tmp_path, monkeypatch):
    d = tmp_path / "wikitext-103-raw-v1"
    d.mkdir()
    for name in ("train-00000-of-00001.parquet", "validation-00000-of-00001.parquet"):
        (d / name).write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        prepare_wikitext(tmp_path, tmp_path / "out")


def hf_rows(text):
    """Hugging Face's rows: the raw file's lines, blank ones stored as ''."""
    return [line if line.strip() else "" for line in text.splitlines(keepends=True)]


def test_parquet_layout_matches_raw(tmp_path):
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    d = tmp_path / "hf" / "wikitext-103-raw-v1"
    d.mkdir(parents=True)
    rows = hf_rows(TRAIN)
    half = len(rows) // 2
    pq.write_table(pa.table({"text": rows[:half]}), d / "train-00000-of-00002.parquet")
    pq.write_table(pa.table({"text": rows[half:]}), d / "train-00001-of-00002.parquet")
    pq.write_table(pa.table({"text": hf_rows(VALID)}), d / "validation-00000-of-00001.parquet")
    pq.write_table(pa.table({"text": ["ignored"]}), d / "test-00000-of-00001.parquet")
    # Another config beside it must not be mixed in.
    other = tmp_path / "hf" / "wikitext-2-raw-v1"
    other.mkdir()
    pq.write_table(pa.table({"text": ["nope\n"]}), other / "train-00000-of-00001.parquet")

    meta = prepare_wikitext(tmp_path / "hf", tmp_path / "pq")
    assert meta["layout"] == "parquet" and len(meta["sources"]) == 3
    make_raw(tmp_path / "raw")
    prepare_wikitext(tmp_path / "raw", tmp_path / "rw")
    for split in ("train", "val"):
        assert (tmp_path / "pq" / f"{split}.bin").read_bytes() == \
            (tmp_path / "rw" / f"{split}.bin").read_bytes()


def test_parquet_without_text_column(tmp_path):
    pa = require("pyarrow")
    pq = require("pyarrow.parquet")
    for split in ("train", "validation"):
        (tmp_path / split).mkdir()
        pq.write_table(pa.table({"content": ["x\n"]}), tmp_path / split / "0000.parquet")
    with pytest.raises(ValueError, match="no 'text' column .*content"):
        prepare_wikitext(tmp_path, tmp_path / "out")
