"""The decode loop, left padding, stop tokens and the streaming detokenizer, on a numpy
bigram model standing in for a network (the real models: tests/generate/test_models.py)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nntile_lab.data.tokenizer import get_encoding
from nntile_lab.generate import loop
from nntile_lab.generate.batching import PAD_ID, left_pad
from nntile_lab.generate.detokenize import StreamDecoder
from nntile_lab.generate.sampling import Sampler, Sampling
from nntile_lab.generate.stopping import StopTokens


class Bigram:
    """logits of the next token = table[last real token]; records what it was fed."""

    def __init__(self, table):
        self.table, self.fed, self.columns = table, [], []

    def prefill(self, prompts):
        self.fed.append(prompts.ids.copy())
        return self.table[prompts.ids[:, -1]]

    def step(self, tokens, column):
        self.fed.append(np.asarray(tokens)[:, None].copy())
        self.columns.append(column)
        return self.table[np.asarray(tokens)]


def unbatched_greedy(table, prompt, n, stop):
    out = []
    last = prompt[-1]
    for _ in range(n):
        last = int(np.argmax(table[last]))
        out.append(last)
        if stop.hit(out):
            break
    return out


@given(st.integers(0, 2**32 - 1), st.lists(st.integers(1, 6), min_size=1, max_size=4),
       st.integers(1, 8), st.booleans())
def test_batched_greedy_equals_each_row_alone(seed, lengths, n, with_stop):
    rng = np.random.default_rng(seed)
    V = 9
    table = rng.standard_normal((V, V)).astype(np.float32)
    prompts = [rng.integers(0, V, size=k).tolist() for k in lengths]
    stop = StopTokens([int(rng.integers(0, V)), [1, 2]] if with_stop else None, V)
    batch = left_pad(prompts, vocab_size=V, n_positions=16, max_new_tokens=n)
    model = Bigram(table)
    gen = loop.run(model, batch, n, Sampler(Sampling(greedy=True)), stop)
    for b, p in enumerate(prompts):
        want = unbatched_greedy(table, p, n, stop)
        assert gen.tokens[b] == want
        assert gen.finish[b] == ("stop" if stop.hit(want) else "length")
    T = max(lengths)
    assert model.columns == list(range(T, T + gen.steps))
    assert gen.steps == max(len(t) for t in gen.tokens) - 1
    assert gen.decode_tokens == gen.steps * len(prompts)
    assert gen.prefill_tokens == sum(lengths)


def test_left_padding_layout():
    batch = left_pad([[5, 6, 7], [8]], vocab_size=10, n_positions=8, max_new_tokens=2)
    assert batch.ids.tolist() == [[5, 6, 7], [PAD_ID, PAD_ID, 8]]
    assert batch.pads.tolist() == [0, 2]
    assert batch.positions(0, 3).tolist() == [[0, 1, 2], [0, 0, 0]]
    assert batch.positions(3, 2).tolist() == [[3, 4], [1, 2]]
    assert batch.row(1).tolist() == [8]
    # one flat prompt, or a 2-D array
    assert left_pad([3, 4], vocab_size=10).ids.tolist() == [[3, 4]]
    assert left_pad(np.array([[1, 2], [3, 4]]), vocab_size=10).pads.tolist() == [0, 0]


@pytest.mark.parametrize("prompts,kw,match", [
    ([], {}, "no prompt"),
    ([[1, 2], []], {}, "prompt 1 is empty"),
    ([[1, 12]], {}, r"prompt 0, token 1: id 12 is not a token of this model: ids must be in "
                    r"\[0, 10\)"),
    ([[-1]], {}, "id -1 is not a token"),
    ([[1] * 9], {"n_positions": 8}, "prompt 0 has 9 tokens, more than the model's "
                                    "n_positions=8"),
    ([[1] * 6], {"n_positions": 8, "max_new_tokens": 4},
     r"max_new_tokens=4 after a prompt of 6 tokens needs 9 positions, past the cache of "
     r"n_positions=8: at most 3 new tokens"),
    ([[1]], {"max_new_tokens": 0}, "max_new_tokens=0 must be an integer ≥ 1"),
    ([[[1, 2]]], {}, "prompt 0 must be a flat sequence of integer token ids"),
    ([["a"]], {}, "prompt 0 must be a flat sequence of integer"),
])
def test_bad_prompts_are_refused(prompts, kw, match):
    kw = {"max_new_tokens": 1, **kw}
    with pytest.raises(ValueError, match=match):
        left_pad(prompts, vocab_size=10, **kw)


def test_exactly_the_positions_of_the_cache_are_allowed():
    left_pad([[1] * 6], vocab_size=10, n_positions=8, max_new_tokens=3)   # 8 positions


@pytest.mark.parametrize("stop,match", [
    ([[]], "empty stop sequence"),
    ([1.5], "1.5 is not a token id"),
    ([[1, 99]], r"token id 99 is outside the vocabulary: ids must be in \[0, 10\)"),
])
def test_bad_stop_tokens(stop, match):
    with pytest.raises(ValueError, match=match):
        StopTokens(stop, 10)


def test_stop_sequences():
    s = StopTokens([7, [1, 2]], 10)
    assert s.hit([3, 7]) and s.hit([1, 2]) and s.hit([5, 1, 2])
    assert not s.hit([2, 1]) and not s.hit([1]) and not s.hit([])
    assert StopTokens(4, 10).sequences == ((4,),)


def test_interrupt_keeps_what_was_generated():
    table = np.eye(5, dtype=np.float32)[[1, 2, 3, 4, 0]]   # 0→1→2→3→4→0…
    batch = left_pad([[0]], vocab_size=5, n_positions=20, max_new_tokens=10)
    seen = []

    def on_tokens(tokens, live):
        seen.append(int(tokens[0]))
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(loop.GenerationInterrupted) as info:
        loop.run(Bigram(table), batch, 10, Sampler(Sampling(greedy=True)), on_tokens=on_tokens)
    gen = info.value.generation
    assert gen.tokens == [[1, 2, 3]] and gen.finish == ["interrupted"]
    assert isinstance(info.value, KeyboardInterrupt)
    assert "after 3 new tokens" in str(info.value)


@given(st.lists(st.integers(0, 50256), max_size=40))
def test_stream_decoder_joins_to_decode(ids):
    enc = get_encoding()
    dec = StreamDecoder(enc)
    pieces = [dec.push(t) for t in ids] + [dec.flush()]
    assert "".join(pieces) == enc.decode(ids) == dec.text


def test_stream_decoder_holds_a_split_character():
    enc = get_encoding()
    ids = enc.encode("a 🦙 b")
    dec = StreamDecoder(enc)
    pieces = [dec.push(t) for t in ids]
    assert "\ufffd" not in "".join(pieces)
    assert "".join(pieces) + dec.flush() == "a 🦙 b"
    assert "" in pieces          # the llama's bytes span tokens: nothing printed mid-way
