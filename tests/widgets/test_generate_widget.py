"""The generation widget, driven through its callbacks: the streamed text is the model's
greedy continuation; Stop ends a running generation within a second, the text so far kept;
bad settings are a sentence in the status line."""
import html
import re
import time

import nntile_lab as nl
from nntile_lab.data.tokenizer import get_encoding
from nntile_lab.nn.config import GPT2Config
from nntile_lab.sample.text import encode
from nntile_lab.widgets import GenerateWidget
from tests.generate.test_models import wide_state

CFG = GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=128, vocab_size=50257,
                 vocab_tile=8192)


def words(label) -> str:
    """What an HTML label shows, as a reader sees it."""
    return html.unescape(re.sub(r"<[^>]+>", "", label.value))


def shown(widget) -> str:
    """The text the output shows (prompt and generated)."""
    return words(widget.text)


def test_generate_streams_the_greedy_continuation(rt1):
    model = nl.GPT2(CFG)
    model.load_state_dict(wide_state(CFG, 1))
    try:
        gw = GenerateWidget(model, prompt="The tiles", max_new_tokens=12)
        gw.greedy.value = True
        s = gw.generate()
        want = model.generate([encode("The tiles")], 12, greedy=True).tokens[0]
    finally:
        model.free()
    assert s.tokens == want
    assert s.text == get_encoding().decode(want)
    assert shown(gw) == "The tiles" + s.text
    assert "12 new tokens" in words(gw.status) and "decode" in words(gw.status)
    assert not gw.generate_button.disabled and gw.stop_button.disabled


def test_stop_ends_a_running_generation_within_a_second(rt1):
    model = nl.GPT2(CFG)
    model.load_state_dict(wide_state(CFG, 2))
    try:
        gw = GenerateWidget(model, prompt="x", max_new_tokens=127)
        gw.seed.value = "3"
        assert gw.start()
        t0 = time.monotonic()
        while not gw._pieces and time.monotonic() - t0 < 120:   # the first text is out
            time.sleep(0.01)
        assert gw._pieces, "no text within 120 s"
        t = time.monotonic()
        gw.stop()
        assert gw.wait(timeout=1.0), "still generating a second after Stop"
        stopped_after = time.monotonic() - t
    finally:
        gw.wait(timeout=30)
        model.free()
    s = gw.sample
    assert s is not None and s.interrupted and 0 < len(s.tokens) < 127, stopped_after
    assert s.generation.finish == ["interrupted"]
    assert shown(gw) == "x" + s.text
    assert gw.status.value.startswith("stopped")


def test_bad_settings_are_one_sentence_in_the_status(rt1):
    model = nl.GPT2(CFG)
    try:
        gw = GenerateWidget(model, prompt=" word" * 200)
        assert gw.generate() is None
        assert "more than the model's n_positions=128" in words(gw.status)
        gw.prompt.value, gw.seed.value = "ok", "abc"
        assert gw.generate() is None
        assert "seed 'abc' is not a whole number" in words(gw.status)
        gw.seed.value, gw.max_new_tokens.value = "", 128
        gw.prompt.value = "a b c"
        assert gw.generate() is None
        assert "at most 126 new tokens" in words(gw.status)
    finally:
        model.free()
