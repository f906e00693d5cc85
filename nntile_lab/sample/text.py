"""Text in, text out: a prompt string through the GPT-2 BPE into ``model.generate``, the new
tokens back to text as they come (the command line's and the notebook widget's way in).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nntile_lab.data.tokenizer import EOT, get_encoding
from nntile_lab.generate import Generation, GenerationInterrupted, StreamDecoder
from nntile_lab.generate.stopping import AnyStop, StopStrings, StopTokens


def encode(text: str) -> list[int]:
    """The prompt's GPT-2 token ids (``<|endoftext|>`` written out is the end-of-text
    token); an empty prompt is the end-of-text token alone (text from nothing)."""
    ids = get_encoding().encode(text, allowed_special={EOT})
    return ids or get_encoding().encode(EOT, allowed_special={EOT})


@dataclass
class Sample:
    """One generated text: the prompt, the new text and tokens, and the generation
    (timings, why it ended)."""

    prompt: str
    text: str
    tokens: list[int]
    generation: Generation
    interrupted: bool = False

    def record(self) -> dict:
        g = {k: v for k, v in self.generation.summary().items()
             if k not in ("batch", "new_tokens", "finish")}
        return {"prompt": self.prompt, "text": self.text, "tokens": self.tokens,
                "finish": self.generation.finish[0], **g}


def sample_text(model, prompt: str, max_new_tokens: int, *, on_text: Callable[[str], None]
                | None = None, stop_strings=(), stop=None, check_stop=None,
                **sampling) -> Sample:
    """Generate from ``prompt`` (one row), calling ``on_text(piece)`` as text completes.
    ``sampling``: ``greedy``, ``temperature``, ``top_k``, ``top_p``, ``seed`` (as
    ``model.generate``). A Ctrl-C or a stop request ends it early: the text so far is
    returned with ``interrupted=True``."""
    enc = get_encoding()
    dec = StreamDecoder(enc)
    ids = encode(prompt)
    stops = AnyStop(StopTokens(stop, model.config.vocab_size), StopStrings(stop_strings,
                                                                           enc.decode))

    def on_tokens(tokens, live):
        if live[0]:
            piece = dec.push(int(tokens[0]))
            if piece and on_text is not None:
                on_text(piece)

    interrupted = False
    try:
        gen = model.generate([ids], max_new_tokens, stop=stops, on_tokens=on_tokens,
                             check_stop=check_stop, **sampling)
    except GenerationInterrupted as exc:
        gen, interrupted = exc.generation, True
    tail = dec.flush()
    if tail and on_text is not None:
        on_text(tail)
    return Sample(prompt, dec.text, gen.tokens[0], gen, interrupted)
