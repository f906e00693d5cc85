"""prepare(): any text into train.bin / val.bin / meta.json, and its CLI command."""

import argparse
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nntile_lab.data import get_encoding, load_split, prepare, read_meta
from nntile_lab.data.cli import register_cli
from nntile_lab.data.tokenizer import EOT_ID

DOCS = {
    "b/second.txt": "Second file: naïve café, 中文 and emoji 😀.\n\n  indented\r\n",
    "a.md": "# Title\n\nIt's a *markdown* file with numbers 12345.\n",
    "b/c/third.py": "def f(x):\n    return x + 1  # comment\n",
}


def make_tree(root):
    for rel, text in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "b" / "image.bin").write_bytes(b"\x89PNG\0\0\x01")
    return root


def expected_stream(texts):
    enc = get_encoding()
    return [t for text in texts for t in [*enc.encode_ordinary(text), EOT_ID]]


def test_directory_round_trip(tmp_path):
    src = make_tree(tmp_path / "src")
    meta = prepare([src], tmp_path / "out", val_fraction=0.25)
    order = ["a.md", "b/c/third.py", "b/second.txt"]  # sorted relative paths
    stream = expected_stream(DOCS[k] for k in order)
    train, val = load_split(tmp_path / "out", "train"), load_split(tmp_path / "out", "val")
    assert train.tokens.tolist() + val.tokens.tolist() == stream
    assert len(val) == round(len(stream) * 0.25)
    assert meta == read_meta(tmp_path / "out")
    assert meta["train_tokens"] == len(train) and meta["val_tokens"] == len(val)
    assert meta["sources"] == [str(src / k) for k in order]
    assert meta["skipped_non_text"] == 1  # image.bin; .git is not even visited
    assert meta["tokenizer"] == "gpt2" and meta["eot_token"] == EOT_ID
    text = get_encoding().decode(train.tokens.tolist() + val.tokens.tolist())
    assert text == "<|endoftext|>".join(DOCS[k] for k in order) + "<|endoftext|>"
    assert sorted(os.listdir(tmp_path / "out")) == ["meta.json", "train.bin", "val.bin"]


def test_files_and_extension_filter(tmp_path):
    src = make_tree(tmp_path / "src")
    meta = prepare([src / "a.md", src], tmp_path / "out", extensions=["py", ".TXT"])
    assert meta["sources"] == [str(src / "a.md"), str(src / "b/c/third.py"),
                               str(src / "b/second.txt")]
    assert meta["train_tokens"] + meta["val_tokens"] == len(
        expected_stream([DOCS["a.md"], DOCS["b/c/third.py"], DOCS["b/second.txt"]]))


def test_output_inside_input_is_ignored(tmp_path):
    src = make_tree(tmp_path / "src")
    first = prepare([src], src / "data")
    second = prepare([src], src / "data")
    assert second["sources"] == first["sources"]
    assert second["train_tokens"] == first["train_tokens"]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.characters(exclude_characters="\0", exclude_categories=("Cs",)),
                                     min_size=1, max_size=300),
                     min_size=1, max_size=4),
       frac=st.floats(0.2, 0.8))
def test_token_counts_match_direct_encoding(tmp_path, texts, frac):
    # (NUL is left out: it marks a file as binary.)
    src = tmp_path / "docs"
    src.mkdir(exist_ok=True)
    for old in src.iterdir():
        old.unlink()
    names = [f"{i:02d}.txt" for i in range(len(texts))]
    for name, text in zip(names, texts, strict=True):
        (src / name).write_bytes(text.encode())
    stream = expected_stream(texts)
    n_val = round(len(stream) * frac)
    if min(n_val, len(stream) - n_val) < 2:
        with pytest.raises(ValueError, match="at least 2 are needed"):
            prepare([src], tmp_path / "out", val_fraction=frac)
        return
    meta = prepare([src], tmp_path / "out", val_fraction=frac)
    assert (meta["train_tokens"], meta["val_tokens"]) == (len(stream) - n_val, n_val)
    got = np.concatenate([load_split(tmp_path / "out", s).tokens for s in ("train", "val")])
    assert got.tolist() == stream


@pytest.mark.parametrize("frac", [0.0, 1.0, -0.5, 2.0])
def test_bad_val_fraction(tmp_path, frac):
    with pytest.raises(ValueError, match=f"got {frac}"):
        prepare([make_tree(tmp_path)], tmp_path / "out", val_fraction=frac)


def test_input_errors(tmp_path):
    with pytest.raises(ValueError, match="no inputs given"):
        prepare([], tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        prepare([tmp_path / "missing.txt"], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no UTF-8 text files found in .*empty.*\(0 other"):
        prepare([tmp_path / "empty"], tmp_path / "out")
    # text in another encoding is named as such, with the fix (it was "no text files")
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    for path in (tmp_path / "latin" / "latin1.txt", tmp_path / "latin"):
        with pytest.raises(ValueError, match=r"latin1.txt is text but not UTF-8 \(byte 0xe9 at "
                                             r"offset 3 is not UTF-8.*iconv -f latin1 -t utf-8"):
            prepare([path], tmp_path / "out")
    (tmp_path / "binary.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="binary.bin is not a text file \\(it has NUL bytes\\)"):
        prepare([tmp_path / "binary.bin"], tmp_path / "out")
    (tmp_path / "tiny.txt").write_text("hi")
    with pytest.raises(ValueError, match="val split would hold 0 token"):
        prepare([tmp_path / "tiny.txt"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def run_cli(argv, capsys):
    parser = argparse.ArgumentParser(prog="nntile-lab")
    register_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json(tmp_path, capsys):
    src = make_tree(tmp_path / "src")
    code, out, err = run_cli(
        ["prepare", str(src), "--out", str(tmp_path / "o"), "--val-fraction", "0.3", "--json"],
        capsys)
    assert code == 0 and err == ""
    assert out.count("\n") == 1
    meta = json.loads(out)
    assert meta == read_meta(tmp_path / "o") and meta["val_fraction"] == 0.3


def test_cli_text_output_and_errors(tmp_path, capsys):
    src = make_tree(tmp_path / "src")
    code, out, _ = run_cli(["prepare", str(src), "--ext", "md", "--out", str(tmp_path / "o")],
                           capsys)
    meta = read_meta(tmp_path / "o")
    assert code == 0 and f"train.bin {meta['train_tokens']} tokens" in out
    assert meta["sources"] == [str(src / "a.md")]

    code, _, err = run_cli(["prepare", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "exactly one" in err
    code, _, err = run_cli(["prepare", str(src), "--wikitext", str(src), "--out", "o"], capsys)
    assert code == 2 and "exactly one" in err
    code, _, err = run_cli(["prepare", "--wikitext", str(src), "--val-fraction", "0.2",
                            "--out", "o"], capsys)
    assert code == 2 and "its own validation split" in err
    code, _, err = run_cli(["prepare", str(tmp_path / "nope"), "--out", "o"], capsys)
    assert code == 1 and "error:" in err and "nope" in err


def test_cli_wikitext_route(tmp_path, capsys):
    wt = tmp_path / "wikitext-103-raw"
    wt.mkdir()
    (wt / "wiki.train.raw").write_text(" = A = \n \n Some text here . \n")
    (wt / "wiki.valid.raw").write_text(" = B = \n \n Other text . \n")
    code, out, err = run_cli(["prepare", "--wikitext", str(tmp_path), "--out",
                              str(tmp_path / "o"), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["source"] == "wikitext103"
