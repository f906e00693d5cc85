"""The decode loop, for any model that gives a ``Decoder``: prefill the prompts, then one
step per token until every row stopped.

A ``Decoder`` (``LanguageModel.decoder``: the layers with a KV cache) has two calls, both
returning the logits of each row's last position as a (B, V) float32 numpy array:

- ``prefill(prompts)``: the whole left-padded prompt batch (``batching.Prompts``) at once,
  writing every prompt position's keys and values into the cache;
- ``step(tokens, column)``: one new token per row (B,) at batch column ``column`` (the
  same for every row: left padding), writing that one position of the cache.

A row that stopped keeps being fed (the batch keeps its shape; its tokens are dropped);
the loop ends when every row has stopped. The time of each part is measured around the
wait for its logits, so prefill and decode tokens/s are what a user waits for.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from nntile_lab.generate.batching import Prompts
from nntile_lab.generate.sampling import Sampler
from nntile_lab.generate.stopping import StopTokens
from nntile_lab.interrupts import Interrupted
from nntile_lab.interrupts import check_stop as _check_stop


@dataclass
class Generation:
    """What a generation produced: the new tokens of each row (stop tokens included),
    why each row ended (``"stop"``, ``"length"``, or ``"interrupted"``), and timings."""

    prompts: Prompts
    tokens: list[list[int]]
    finish: list[str]
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    steps: int = 0                      # decode steps run (each: B positions)
    step_seconds: list[float] = field(default_factory=list)

    @property
    def batch(self) -> int:
        return len(self.tokens)

    @property
    def prefill_tokens(self) -> int:
        """Real prompt tokens (pads left out)."""
        return int(self.prompts.lengths.sum())

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prefill_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens(self) -> int:
        """Positions the decode steps computed: B per step (rows that stopped included:
        the batch's work)."""
        return self.steps * self.batch

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_tokens / self.decode_seconds if self.decode_seconds else 0.0

    def summary(self) -> dict:
        return {"batch": self.batch, "prompt_tokens": self.prefill_tokens,
                "new_tokens": [len(t) for t in self.tokens], "finish": list(self.finish),
                "prefill_seconds": self.prefill_seconds, "decode_seconds": self.decode_seconds,
                "decode_steps": self.steps,
                "prefill_tokens_per_s": self.prefill_tokens_per_s,
                "decode_tokens_per_s": self.decode_tokens_per_s}


class GenerationInterrupted(Interrupted):
    """Ctrl-C (or a Stop button) during a generation; ``generation`` holds what was made."""

    def __init__(self, generation: Generation):
        n = sum(len(t) for t in generation.tokens)
        super().__init__(f"generation stopped after {n} new tokens; the text so far is kept")
        self.generation = generation


OnTokens = Callable[[np.ndarray, np.ndarray], None]


def run(decoder, prompts: Prompts, max_new_tokens: int, sampler: Sampler,
        stop: StopTokens | None = None, on_tokens: OnTokens | None = None,
        check_stop: Callable[[], None] | None = None) -> Generation:
    """Generate up to ``max_new_tokens`` per row. ``on_tokens(tokens, live)`` is called
    with each step's tokens (B,) and which rows they extend (a row's stop token included);
    ``check_stop()`` between steps raises to stop (default ``interrupts.check_stop``: a
    widget's Stop button, Kernel → Interrupt). A KeyboardInterrupt (``Stopped`` included)
    ends the loop with ``GenerationInterrupted``, which holds what was generated."""
    check_stop = _check_stop if check_stop is None else check_stop
    B = prompts.ids.shape[0]
    stop = stop or StopTokens()
    gen = Generation(prompts, [[] for _ in range(B)], ["length"] * B)
    live = np.ones(B, bool)
    try:
        t0 = time.perf_counter()
        logits = decoder.prefill(prompts)
        gen.prefill_seconds = time.perf_counter() - t0
        column = prompts.ids.shape[1]
        while True:
            check_stop()
            t0 = time.perf_counter()
            tokens = sampler(logits)
            for b in np.flatnonzero(live):
                gen.tokens[b].append(int(tokens[b]))
            if on_tokens is not None:
                on_tokens(tokens, live.copy())
            for b in np.flatnonzero(live):
                if stop.hit(gen.tokens[b]):
                    live[b], gen.finish[b] = False, "stop"
                elif len(gen.tokens[b]) >= max_new_tokens:
                    live[b] = False
            sample_s = time.perf_counter() - t0
            if not live.any():
                gen.decode_seconds += sample_s
                break
            t0 = time.perf_counter()
            logits = decoder.step(tokens, column)
            dt = time.perf_counter() - t0 + sample_s
            gen.decode_seconds += dt
            gen.step_seconds.append(dt)
            gen.steps += 1
            column += 1
    except KeyboardInterrupt:
        for b in np.flatnonzero(live):
            gen.finish[b] = "interrupted"
        raise GenerationInterrupted(gen) from None
    return gen
