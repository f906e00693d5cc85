"""``model.generate``: the same for every model built from layers (nn.decoding's cache and
decoder, nntile_lab.generate's sampler, stop rules and loop)."""
from __future__ import annotations

from nntile_lab.generate import loop
from nntile_lab.generate.batching import left_pad
from nntile_lab.generate.sampling import Sampler, Sampling
from nntile_lab.generate.stopping import StopTokens
from nntile_lab.nn.decoding import Decoder


def generate(model, prompt_ids, max_new_tokens: int, *, greedy: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             seed: int | None = None, stop=None, on_tokens=None, check_stop=None,
             cache_tile: int | None = None) -> loop.Generation:
    """Continue each prompt (a list of token-id lists, or one list) by up to
    ``max_new_tokens`` tokens: greedy (the most likely token) or drawn at ``temperature``
    from the ``top_k`` / ``top_p`` filtered softmax (``generate.sampling``), reproducibly
    with ``seed``. ``stop``: token ids or id sequences ending a row (``generate.stopping``;
    or any object with ``hit(tokens)``). Prompts of different lengths are left padded
    (``generate.batching``). ``on_tokens(tokens, live)`` sees each step's tokens as they
    come. Returns a ``Generation``: ``.tokens`` (the new tokens of each row), ``.finish``,
    prefill and decode timings. Every bad value is refused before any work, naming it and
    its limit."""
    c = model.config
    sampler = Sampler(Sampling(greedy=greedy, temperature=temperature, top_k=top_k,
                               top_p=top_p), seed)
    prompts = left_pad(prompt_ids, vocab_size=c.vocab_size, n_positions=c.n_positions,
                       max_new_tokens=max_new_tokens)
    stop = stop if hasattr(stop, "hit") else StopTokens(stop, c.vocab_size)
    if cache_tile is not None and (isinstance(cache_tile, bool) or not isinstance(cache_tile, int)
                                   or cache_tile < 1):
        raise ValueError(f"cache_tile={cache_tile!r} must be a positive integer (positions per "
                         "KV-cache tile) or None (all of n_positions)")
    decoder = Decoder(model, prompts.ids.shape[0], cache_tile=cache_tile)
    try:
        return loop.run(decoder, prompts, max_new_tokens, sampler, stop, on_tokens, check_stop)
    finally:
        decoder.close()
