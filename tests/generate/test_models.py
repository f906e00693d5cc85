"""Generation from the tiled models against Hugging Face: greedy tokens equal
``GPT2LMHeadModel.generate(do_sample=False)``'s (and ``LlamaForCausalLM``'s for nl.Llama:
rotary positions, grouped-query heads) with the same weights, for prompts of
several lengths, batched (left padded) or alone, over random sizes and every tiling the
strategy draws (the KV cache's position tile included); the logits of the prefill and of
the decode steps equal the reference's; seeded sampling is reproducible.

Random weights are drawn wide (std 0.3, not GPT-2's 0.02) so that the model writes varied
tokens with logits far apart, as a trained one does; where Hugging Face's own top two
logits at a step are closer than float32 rounding can separate (``TIE``), both answers are
right and the comparison stops there (the test says so if it happens).
"""
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

import nntile_lab as nl
from nntile_lab.generate.batching import left_pad
from nntile_lab.nn.config import GPT2Config
from nntile_lab.nn.decoding import Decoder
from nntile_lab.reference import hf_generate as hf

TIE = 1e-4     # relative to the largest |logit|: float32 rounding of two different sums


def wide_state(config, seed):
    """A state dict (Hugging Face names) of random weights with std 0.3, norms' gains 1 ±
    0.1: varied text with well-separated logits."""
    rng = np.random.default_rng(seed)
    shapes = hf.gpt2_model(config).state_dict()
    state = {}
    for k, v in shapes.items():
        if k == "lm_head.weight" or k.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        a = rng.standard_normal(tuple(v.shape)) * (0.3 if v.ndim == 2 else 0.1)
        if k.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            a += 1.0
        state[k] = a.astype(np.float32)
    return state


@st.composite
def model_case(draw):
    n_head = draw(st.sampled_from([1, 2, 4]))
    D = draw(st.sampled_from([4, 8, 16]))
    E = n_head * D
    V = draw(st.integers(20, 300))
    P = draw(st.integers(12, 24))
    inner = draw(st.sampled_from([None, 3 * E]))
    F = inner or 4 * E
    cfg = GPT2Config(
        n_layer=draw(st.integers(1, 2)), n_head=n_head, n_embd=E, n_positions=P,
        vocab_size=V, n_inner=inner,
        embd_tile=draw(st.integers(1, E)), inner_tile=draw(st.integers(1, F)),
        head_tile=draw(st.integers(1, n_head)), vocab_tile=draw(st.integers(1, V)),
        seq_tile=draw(st.integers(1, 8)), batch_tile=draw(st.one_of(st.none(), st.integers(1, 3))))
    lengths = draw(st.lists(st.integers(1, 10), min_size=1, max_size=3))
    new = draw(st.integers(1, P - max(lengths) + 1))
    return dict(config=cfg, lengths=lengths, new=min(new, 8),
                cache_tile=draw(st.one_of(st.none(), st.integers(1, P))),
                seed=draw(st.integers(0, 2**32 - 1)))


def agree_until_tie(got, want, reference, prompt):
    """Whether ``got`` equals ``want`` (Hugging Face's greedy tokens) — or does up to a step
    where the reference's two best logits tie within float32 rounding, and ``got`` takes
    one of the tied tokens there."""
    if got == want:
        return True
    s = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) \
        else min(len(got), len(want))
    with torch.inference_mode():
        logits = reference(torch.tensor([list(prompt) + want[:s]])).logits[0, -1].double()
    top = float(logits.max())
    tied = torch.nonzero(logits >= top - TIE * float(logits.abs().max())).flatten().tolist()
    note(f"tokens differ at step {s}: ours {got[s:s + 1]}, reference {want[s]}, tied {tied}")
    return len(tied) > 1 and s < len(got) and got[s] in tied


def check_greedy(model, reference, prompts, new, cache_tile):
    """Greedy tokens, the prompts batched (left padded) and each alone, are the
    reference's (``generate`` one by one)."""
    want = hf.generate(reference, prompts, new)
    batched = model.generate(prompts, new, greedy=True, cache_tile=cache_tile)
    alone = [model.generate([p], new, greedy=True, cache_tile=cache_tile).tokens[0]
             for p in prompts]
    for p, b, a, w in zip(prompts, batched.tokens, alone, want):
        assert agree_until_tie(a, w, reference, p)
        assert agree_until_tie(b, w, reference, p)
    assert batched.finish == ["length"] * len(prompts)


def check_step_logits(model, reference, prompts, new, cache_tile, rng):
    """The decoder's prefill and step logits (the prompts batched, any tokens fed) against
    the reference's forward on each row's sequence so far, alone, to a tolerance float32
    sums allow."""
    cfg = model.config
    batch = left_pad(prompts, vocab_size=cfg.vocab_size, n_positions=cfg.n_positions,
                     max_new_tokens=new)
    dec = Decoder(model, len(prompts), cache_tile=cache_tile)
    try:
        got = [dec.prefill(batch)]
        seqs = [list(p) for p in prompts]
        column = batch.ids.shape[1]
        for _ in range(new - 1):
            tokens = rng.integers(0, cfg.vocab_size, len(prompts))   # any tokens will do
            for s, t in zip(seqs, tokens):
                s.append(int(t))
            got.append(dec.step(tokens, column))
            column += 1
    finally:
        dec.close()
    for step, logits in enumerate(got):
        for b, s in enumerate(seqs):
            n = len(prompts[b]) + step
            with torch.inference_mode():
                want = reference(torch.tensor([s[:n]])).logits[0, -1].double().numpy()
            err = np.abs(logits[b] - want).max() / np.abs(want).max()
            assert err < 1e-4, f"row {b} step {step}: relative error {err:.2e}"


@contextmanager
def gpt2_case(case):
    """(model, reference, prompts, rng) of a ``model_case``: nl.GPT2 and GPT2LMHeadModel
    holding the same wide weights; the model freed after."""
    cfg = case["config"]
    rng = np.random.default_rng(case["seed"])
    prompts = [rng.integers(0, cfg.vocab_size, n).tolist() for n in case["lengths"]]
    state = wide_state(cfg, case["seed"])
    model = nl.GPT2(cfg)
    try:
        model.load_state_dict(state)
        yield model, hf.gpt2_model(cfg, state), prompts, rng
    finally:
        model.free()


@given(model_case())
def test_greedy_tokens_are_hugging_faces(rt, case):
    with gpt2_case(case) as (model, reference, prompts, _):
        check_greedy(model, reference, prompts, case["new"], case["cache_tile"])


@given(model_case())
def test_logits_of_each_step_are_the_references(rt, case):
    """The decoder's prefill and step logits against Hugging Face's forward on the whole
    sequence so far (each row alone), to a tolerance float32 sums allow."""
    with gpt2_case(case) as (model, reference, prompts, rng):
        check_step_logits(model, reference, prompts, case["new"], case["cache_tile"], rng)


@st.composite
def llama_case(draw):
    """A Llama (nl.Llama): 1–2 key/value heads each shared by 1–3 query heads, rotary
    bases far apart (3.7 turns fast), any tiling with whole query groups per head tile;
    prompts and KV-cache tiles as ``model_case``."""
    n_kv, group = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    n_head, D = n_kv * group, draw(st.sampled_from([4, 8]))
    E, F, V, P = n_head * D, draw(st.integers(4, 48)), draw(st.integers(20, 200)), \
        draw(st.integers(12, 24))
    cfg = nl.LlamaConfig(
        n_layer=draw(st.integers(1, 2)), n_head=n_head, n_kv_head=n_kv, n_embd=E, n_inner=F,
        vocab_size=V, n_positions=P, rope_theta=draw(st.sampled_from([10000.0, 500000.0, 3.7])),
        embd_tile=draw(st.integers(1, E)), inner_tile=draw(st.integers(1, F)),
        head_tile=group * draw(st.integers(1, n_kv)), vocab_tile=draw(st.integers(1, V)),
        seq_tile=draw(st.integers(1, 8)), batch_tile=draw(st.one_of(st.none(), st.integers(1, 3))))
    lengths = draw(st.lists(st.integers(1, 10), min_size=1, max_size=3))
    new = draw(st.integers(1, P - max(lengths) + 1))
    return dict(config=cfg, lengths=lengths, new=min(new, 8),
                cache_tile=draw(st.one_of(st.none(), st.integers(1, P))),
                seed=draw(st.integers(0, 2**32 - 1)))


def wide_llama(cfg, seed):
    """nl.Llama with random weights of std 0.3, the RMS norms' gains 1 ± 0.1 (as
    ``wide_state``), and its state dict."""
    model = nl.Llama(cfg, seed=0)
    rng = np.random.default_rng(seed)
    state = {k: (rng.standard_normal(v.shape) * (0.3 if v.ndim == 2 else 0.1)
                 + (v.ndim == 1)).astype(np.float32) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    return model, state


@settings(max_examples=10)
@given(llama_case())
def test_llama_greedy_tokens_and_step_logits_are_hugging_faces(rt, case):
    """Rotary positions in a decode step are the KV-cache columns (a left-padded row's
    positions shifted by its pads: rotary scores see only differences), grouped-query heads
    read their shared cache head: tokens and logits as LlamaForCausalLM's."""
    cfg = case["config"]
    rng = np.random.default_rng(case["seed"])
    prompts = [rng.integers(0, cfg.vocab_size, n).tolist() for n in case["lengths"]]
    model, state = wide_llama(cfg, case["seed"])
    try:
        reference = hf.llama_model(cfg, state)
        check_greedy(model, reference, prompts, case["new"], case["cache_tile"])
        check_step_logits(model, reference, prompts, case["new"], case["cache_tile"], rng)
    finally:
        model.free()


def test_sampling_is_reproducible_and_batch_rows_follow_their_seed(rt1):
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=64)
    model = nl.GPT2(cfg)
    model.load_state_dict(wide_state(cfg, 5))
    try:
        kw = dict(temperature=1.5, top_k=20, top_p=0.95, seed=11)
        a = model.generate([[1, 2, 3], [4]], 8, **kw).tokens
        b = model.generate([[1, 2, 3], [4]], 8, **kw).tokens
        c = model.generate([[1, 2, 3], [4]], 8, **{**kw, "seed": 12}).tokens
        alone = model.generate([[1, 2, 3]], 8, **kw).tokens
    finally:
        model.free()
    assert a == b and a != c
    assert alone[0] == a[0]     # row 0 draws from the same generator in either batch


def test_stop_token_ends_a_row_and_keeps_it(rt1):
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=20, vocab_size=64)
    model = nl.GPT2(cfg)
    model.load_state_dict(wide_state(cfg, 6))
    try:
        free = model.generate([[5, 6], [7]], 10, greedy=True).tokens
        stop_at = free[0][3]
        g = model.generate([[5, 6], [7]], 10, greedy=True, stop=stop_at)
    finally:
        model.free()
    first = free[0].index(stop_at)
    assert g.tokens[0] == free[0][:first + 1] and g.finish[0] == "stop"
    if stop_at in free[1]:
        assert g.tokens[1] == free[1][:free[1].index(stop_at) + 1]
    else:
        assert g.tokens[1] == free[1] and g.finish[1] == "length"


@pytest.mark.parametrize("kw,match", [
    (dict(prompt_ids=[[]]), "prompt 0 is empty"),
    (dict(prompt_ids=[[1] * 17]), "prompt 0 has 17 tokens, more than the model's "
                                  "n_positions=16"),
    (dict(max_new_tokens=15), r"max_new_tokens=15 after a prompt of 3 tokens needs 17 "
                              r"positions, past the cache of n_positions=16: at most 14"),
    (dict(temperature=0.0), "temperature=0.0 must be a finite number > 0 for sampling"),
    (dict(top_k=0), "top_k=0 must be an integer ≥ 1"),
    (dict(top_p=1.2), r"top_p=1.2 must be in \(0, 1\]"),
    (dict(prompt_ids=[[1, 64]]), r"id 64 is not a token of this model: ids must be in "
                                 r"\[0, 64\)"),
    (dict(stop=[70]), r"stop: token id 70 is outside the vocabulary"),
    (dict(cache_tile=0), "cache_tile=0 must be a positive integer"),
])
def test_bad_input_is_refused_before_any_work(rt1, kw, match):
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=64)
    model = nl.GPT2(cfg)
    args = {"prompt_ids": [[1, 2, 3]], "max_new_tokens": 4, **kw}
    try:
        with pytest.raises(ValueError, match=match):
            model.generate(args.pop("prompt_ids"), args.pop("max_new_tokens"), **args)
    finally:
        model.free()


def test_a_state_dict_of_another_shape_is_refused(rt1):
    small = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=64)
    other = GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=16, vocab_size=64)
    model = nl.GPT2(small)
    try:
        with pytest.raises(ValueError, match=r"transformer.wte.weight has shape \(64, 32\) but "
                                             r"this \w+ needs \(64, 16\)"):
            model.load_state_dict(wide_state(other, 0))
    finally:
        model.free()
