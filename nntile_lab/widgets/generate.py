"""The generation widget: a prompt box, sliders for temperature, top-k and top-p, and a
Generate button that streams the model's text into the output as it is written.

``GenerateWidget(model)``; display it (or its ``.view``). The Generate button runs the
generation in a thread of its own (widgets/background.py: why); the Stop button and Kernel →
Interrupt end it within a second, keeping the text written so far. Bad settings (a prompt
longer than the model's positions, more new tokens than its cache holds) are one sentence in
the status line, naming the value and the limit.

A thin view: ``generate()`` (the whole generation, in the calling thread), ``start()``,
``stop()`` and ``wait()`` are plain methods tests call without a browser. DOM classes:
nl-gen-prompt, -generate, -stop, -text, -status.
"""
from __future__ import annotations

import html

import ipywidgets as w

from nntile_lab.sample.text import Sample, sample_text
from nntile_lab.widgets.background import Background, BackgroundButtons
from nntile_lab.widgets.common import error_html, label


class GenerateWidget(BackgroundButtons):
    """``GenerateWidget(model, prompt="", max_new_tokens=64)`` for a model built from the
    layers (``nl.GPT2``, …) in the running ``Runtime``."""

    def __init__(self, model, prompt: str = "", max_new_tokens: int = 64):
        self.model = model
        limit = model.config.n_positions
        self.prompt = w.Textarea(value=prompt, placeholder="a prompt (empty: from nothing)",
                                 layout=w.Layout(width="520px", height="70px"))
        self.prompt.add_class("nl-gen-prompt")
        self.temperature = w.FloatSlider(value=0.8, min=0.05, max=2.0, step=0.05,
                                         description="temperature")
        self.top_k = w.IntSlider(value=0, min=0, max=min(500, model.config.vocab_size),
                                 description="top-k", tooltip="0: every token")
        self.top_p = w.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05,
                                   description="top-p", tooltip="1: no nucleus cut")
        self.max_new_tokens = w.IntSlider(value=min(max_new_tokens, limit), min=1, max=limit,
                                          description="new tokens")
        self.greedy = w.Checkbox(value=False, description="greedy (most likely token)")
        self.seed = w.Text(value="", description="seed", placeholder="none: new each time",
                           layout=w.Layout(width="240px"))
        self.generate_button = w.Button(description="Generate", button_style="primary",
                                        icon="play")
        self.generate_button.add_class("nl-gen-generate")
        self.generate_button.on_click(lambda _: self.start())
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True,
                                    tooltip="stop now, keeping the text so far (Kernel → "
                                            "Interrupt does the same)")
        self.stop_button.add_class("nl-gen-stop")
        self.stop_button.on_click(lambda _: self.stop())
        self.text = label("nl-gen-text")
        self.status = label("nl-gen-status")
        self.background = Background()
        self.sample: Sample | None = None
        self._pieces: list[str] = []
        self.view = w.VBox([
            self.prompt,
            w.HBox([w.VBox([self.temperature, self.top_k, self.top_p]),
                    w.VBox([self.max_new_tokens, self.greedy, self.seed])]),
            w.HBox([self.generate_button, self.stop_button]), self.status, self.text])

    def _ipython_display_(self):
        # IPython: an optional heavy dependency, loaded where it is used
        from IPython.display import display
        display(self.view)

    def settings(self) -> dict:
        """The sampling settings the controls hold (ValueError naming a bad seed)."""
        seed = self.seed.value.strip()
        if seed and (not seed.isdigit()):
            raise ValueError(f"seed {seed!r} is not a whole number ≥ 0 (empty: a new draw "
                             "each time)")
        return dict(greedy=self.greedy.value, temperature=self.temperature.value,
                    top_k=self.top_k.value or None,
                    top_p=None if self.top_p.value >= 1.0 else self.top_p.value,
                    seed=int(seed) if seed else None)

    def generate(self) -> Sample | None:
        """Generate from the prompt box, the text streamed into the output; returns the
        sample (None when the settings were refused: the status line says why)."""
        self._pieces = []
        self._show()
        self.stop_button.disabled, self.generate_button.disabled = False, True
        self.status.value = "generating…"
        try:
            s = sample_text(self.model, self.prompt.value, self.max_new_tokens.value,
                            on_text=self._piece, **self.settings())
        except ValueError as exc:
            self.status.value = error_html(str(exc))
            return None
        finally:
            self.stop_button.disabled, self.generate_button.disabled = True, False
        self.sample = s
        g = s.generation
        how = "stopped: the text so far" if s.interrupted else {
            "stop": "a stop token", "length": f"{len(s.tokens)} new tokens"}[g.finish[0]]
        self.status.value = (f"{how} · prefill {g.prefill_tokens_per_s:.0f} tokens/s · decode "
                             f"{g.decode_tokens_per_s:.1f} tokens/s")
        return s

    def _piece(self, piece: str) -> None:
        self._pieces.append(piece)
        self._show()

    def _show(self) -> None:
        body = html.escape(self.prompt.value) + "<b>" + html.escape("".join(self._pieces)) \
            + "</b>"
        self.text.value = f"<pre style='white-space: pre-wrap'>{body}</pre>"

    # ---- the buttons ---------------------------------------------------------------
    def start(self) -> bool:
        """The Generate button: ``generate()`` in the background (False if one runs)."""
        return self.background.start(self.generate)

