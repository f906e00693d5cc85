"""Hugging Face ``generate`` as the reference for generation (tests and ``bench generate``;
never needed to generate): a ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` holding given
weights, greedy or sampled decoding of prompts one by one or as a left-padded batch, and its
timings.

Needs the ``bench`` extra (PyTorch and ``transformers``); nothing is downloaded: the model
is built from a config and a state dict in Hugging Face's names and layouts (what
``model.state_dict()`` returns).
"""
from __future__ import annotations

import time

import numpy as np


def _hf():
    try:
        import torch
        import transformers
    except ImportError as exc:   # the reference is optional: say how to get it
        raise ImportError(f"the Hugging Face reference needs PyTorch and transformers "
                          f"({exc}): pip install 'nntile_lab[bench]'") from None
    return torch, transformers


def gpt2_model(config, state: dict[str, np.ndarray] | None = None):
    """A float32 ``GPT2LMHeadModel`` (eval mode, no dropout) of our ``GPT2Config``, with
    the weights of ``state`` (Hugging Face names; the tied head taken from wte)."""
    torch, transformers = _hf()
    hf_config = transformers.GPT2Config(
        vocab_size=config.vocab_size, n_positions=config.n_positions, n_embd=config.n_embd,
        n_layer=config.n_layer, n_head=config.n_head, n_inner=config.n_inner,
        activation_function="gelu_new", layer_norm_epsilon=config.layer_norm_epsilon,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=None, pad_token_id=0)
    model = transformers.GPT2LMHeadModel(hf_config).eval()
    if state is not None:
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                   for k, v in state.items()}
        tensors.setdefault("lm_head.weight", tensors["transformer.wte.weight"])
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        missing = [m for m in missing if not m.endswith(".attn.bias")
                   and not m.endswith(".attn.masked_bias")]
        if missing or unexpected:
            raise ValueError(f"state dict does not fit GPT2LMHeadModel: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
    return model


def llama_model(config, state: dict[str, np.ndarray] | None = None):
    """A float32 ``LlamaForCausalLM`` (eval mode) of our ``LlamaConfig``, with the weights
    of ``state`` (Hugging Face names: ``nl.Llama``'s state dict loads unchanged)."""
    torch, transformers = _hf()
    hf_config = transformers.LlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.n_embd,
        intermediate_size=config.n_inner, num_hidden_layers=config.n_layer,
        num_attention_heads=config.n_head, num_key_value_heads=config.n_kv_head,
        max_position_embeddings=config.n_positions, rms_norm_eps=config.rms_norm_eps,
        rope_theta=config.rope_theta, tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    model = transformers.LlamaForCausalLM(hf_config).eval()
    if state is not None:
        model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                               for k, v in state.items()})
    return model


def generate(model, prompts, max_new_tokens: int, *, batched: bool = False,
             greedy: bool = True, temperature: float = 1.0, top_k=None, top_p=None,
             seed: int | None = None) -> list[list[int]]:
    """The new tokens of each prompt: ``model.generate`` on each prompt alone, or
    (``batched``) on all of them at once, left padded with an attention mask."""
    torch, _ = _hf()
    kw = dict(max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
              do_sample=not greedy, pad_token_id=0)
    if not greedy:
        kw.update(temperature=temperature, top_k=top_k or 0, top_p=1.0 if top_p is None else top_p)
    else:   # no warpers: a model config's defaults must not sneak in
        kw.update(temperature=None, top_k=None, top_p=None)
    if seed is not None:
        torch.manual_seed(seed)
    with torch.inference_mode():
        if not batched:
            out = []
            for p in prompts:
                ids = torch.tensor([list(p)], dtype=torch.long)
                res = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
                out.append(res[0, ids.shape[1]:].tolist())
            return out
        ids, mask = left_padded(prompts)
        res = model.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), **kw)
        return [r[ids.shape[1]:].tolist() for r in res]


def left_padded(prompts) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention_mask) of the prompts padded on the left with id 0."""
    T = max(len(p) for p in prompts)
    ids = np.zeros((len(prompts), T), np.int64)
    mask = np.zeros((len(prompts), T), np.int64)
    for b, p in enumerate(prompts):
        ids[b, T - len(p):] = p
        mask[b, T - len(p):] = 1
    return ids, mask


def timed_generate(model, prompts, max_new_tokens: int) -> float:
    """Seconds of one greedy ``generate`` of the batch (left padded), all new tokens
    forced (no early stop)."""
    torch, _ = _hf()
    ids, mask = left_padded(prompts)
    ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
    with torch.inference_mode():
        t0 = time.perf_counter()
        model.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                       min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0,
                       temperature=None, top_k=None, top_p=None)
        return time.perf_counter() - t0
