"""ExperimentSpec (the one set of defaults) and run records."""
import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nntile_lab.nn.config import GPT2Config
from nntile_lab.spec import ExperimentSpec, parse_value


def test_defaults_are_the_main_job():
    s = ExperimentSpec()
    assert (s.n_layer, s.n_head, s.n_embd, s.vocab_size, s.seq_len, s.batch) == (
        4, 4, 256, 50257, 128, 8)
    assert (s.batch_tile, s.seq_tile, s.embd_tile, s.inner_tile, s.head_tile, s.vocab_tile) == (
        4, None, None, 512, 2, 8192)
    assert (s.positions, s.inner, s.warmup_resolved, s.weight_decay_resolved) == (
        128, 1024, 30, 0.1)
    assert s.replace(optimizer="sgd").weight_decay_resolved == 0.0
    assert s.runtime_kwargs() == {"scheduler": "lws", "ncpu": None, "memory_limit_mb": None,
                                  "ooc_dir": None, "ooc_size_mb": 65536, "hints": s.hints}
    assert s.tokens_per_step() == 8 * 128
    assert (s.eval_every, s.eval_batches, s.checkpoint_every) == (50, 10, 100)


def _defaults(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def test_one_set_of_defaults():
    """GPT2Config, Runtime, train(), the memory planner, the figures' plan and every
    command's options carry no defaults of their own: they are the spec's."""
    from nntile_lab.cli import build_parser
    from nntile_lab.figures.family import FigurePlan
    from nntile_lab.runtime import Runtime
    from nntile_lab.spec import DEFAULTS, field_names
    from nntile_lab.train.trainer import train
    s = ExperimentSpec()
    assert s == DEFAULTS
    cfg = GPT2Config()
    assert {k: getattr(cfg, k) for k in ("n_layer", "n_head", "n_embd", "vocab_size",
                                         "n_positions", "n_inner")} == {
        k: getattr(s.gpt2_config(), k) for k in ("n_layer", "n_head", "n_embd", "vocab_size",
                                                  "n_positions", "n_inner")}
    rt = _defaults(Runtime.__init__)
    assert {k: rt[k] for k in s.runtime_kwargs()} == s.runtime_kwargs()
    tr = _defaults(train)
    assert (tr["grad_accum"], tr["clip_norm"], tr["seed"], tr["eval_every"],
            tr["eval_batches"], tr["checkpoint_every"]) == (
        s.grad_accum, s.clip, s.seed, s.eval_every, s.eval_batches, s.checkpoint_every)
    plan = FigurePlan()
    assert (plan.scheduler, plan.ncpu, plan.warmup_steps, plan.measure_steps) == (
        s.scheduler, s.ncpu, s.warmup_steps, s.measure_steps)
    # every command: a spec field's option defaults to None ("not given"), so the value
    # comes from the spec (or a checkpoint under it), never from argparse
    parser = build_parser()
    names = set(field_names())
    sub = next(a for a in parser._actions if a.dest == "command")
    checked = 0
    for name, p in sub.choices.items():
        parsers = [p]
        if name == "bench":
            parsers = list(next(a for a in p._actions if a.dest == "what").choices.values())
        for q in parsers:
            for a in q._actions:
                if a.dest in names and a.option_strings:
                    assert a.default is None, (name, a.dest, a.default)
                    checked += 1
    assert checked > 3 * len(names)
    args = parser.parse_args(["train"])
    from nntile_lab.train.cli import resolve
    assert resolve(args).spec == s          # `nntile-lab train` with no options = DEFAULTS


def test_optimizers_default_to_the_spec():
    """The optimizer classes' defaults are what ``nntile-lab train`` trains with: the
    spec's lr and weight decay, and its betas, eps and momentum (no second copy)."""
    from nntile_lab import spec
    from nntile_lab.optim import SGD, Adam, AdamW
    s = ExperimentSpec()
    for cls, name in ((AdamW, "adamw"), (Adam, "adam"), (SGD, "sgd")):
        d = _defaults(cls.__init__)
        assert d["lr"] == s.lr == 1e-3, name
        assert d["weight_decay"] == s.replace(optimizer=name).weight_decay_resolved, name
    for cls in (AdamW, Adam):
        assert _defaults(cls.__init__)["betas"] == spec.ADAM_BETAS == (0.9, 0.95)
        assert _defaults(cls.__init__)["eps"] == spec.ADAM_EPS == 1e-8
    assert _defaults(SGD.__init__)["momentum"] == spec.SGD_MOMENTUM == 0.9
    with pytest.raises(ValueError, match="optimizer='lamb' is unknown"):
        spec.default_weight_decay("lamb")


def test_model_config_sits_below_the_spec():
    """nn.config (the model's shape and TILE_FIELDS, read by the spec) imports no spec:
    no import cycle; the spec's model defaults and tile fields are GPT2Config's."""
    import subprocess
    import sys

    from nntile_lab import spec
    from nntile_lab.nn import config
    code = ("import sys, nntile_lab.nn.config; "
            "assert 'nntile_lab.spec' not in sys.modules, 'nn.config imported the spec'")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert spec.TILE_FIELDS is config.TILE_FIELDS
    cfg, s = GPT2Config(), ExperimentSpec()
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.n_positions) == (
        s.n_layer, s.n_head, s.n_embd, s.vocab_size, s.seq_len)


def test_default_tiles_stay_default_through_replace():
    small = ExperimentSpec().replace(vocab_size=100, batch=2, n_head=1, n_embd=64)
    assert (small.vocab_tile, small.batch_tile, small.head_tile, small.inner_tile) == (
        100, 2, 1, 256)
    back = small.replace(vocab_size=50257, batch=8, n_head=4)
    assert back.vocab_tile == 8192 and back.batch_tile == 4 and back.head_tile == 2
    # the batch tile holds 512 tokens' worth of sequences (at least one, at most batch)
    for seq_len, batch, tile in [(128, 8, 4), (256, 4, 2), (256, 1, 1), (1024, 8, 1),
                                 (64, 4, 4), (64, 16, 8), (100, 16, 5)]:
        assert back.replace(seq_len=seq_len, batch=batch).batch_tile == tile, (seq_len, batch)
    pinned = small.replace(vocab_tile=50)          # given: kept and checked
    assert pinned.replace(vocab_size=60).vocab_tile == 50
    with pytest.raises(ValueError, match=r"vocab_tile=50 \(--vocab-tile\) must be from 1 to "
                                         r"vocab_size=40"):
        pinned.replace(vocab_size=40)


@pytest.mark.parametrize("kw, match", [
    ({"vocab_tile": 0}, r"vocab_tile=0 \(--vocab-tile\) must be from 1 to vocab_size=50257"),
    ({"inner_tile": 2048}, r"inner_tile=2048 .* 1 to n_inner=1024"),
    ({"n_head": 3}, r"n_embd=256 is not divisible by n_head=3"),
    ({"batch": 0}, r"batch=0 \(--batch\) must be ≥ 1"),
    ({"seq_len": 64, "n_positions": 32}, r"seq_len=64 exceeds n_positions=32"),
    ({"optimizer": "lion"}, r"optimizer='lion' is unknown; valid ones: adamw, adam, sgd"),
    ({"precision": "fp16"}, r"precision='fp16' \(--precision\) is unknown; valid ones: fp32, "
                            r"bf16, bf16-storage, auto"),
    ({"lr": "fast"}, r"lr='fast' \(--lr\) must be float"),
    ({"batch_tile": 2.5}, r"batch_tile=2.5 \(--batch-tile\) must be int"),
])
def test_bad_values_name_the_field_and_the_range(kw, match):
    with pytest.raises(ValueError, match=match):
        ExperimentSpec(**kw)


def test_dict_round_trip_and_key():
    s = ExperimentSpec(n_layer=2, vocab_tile=1024, scheduler="dmda")
    d = json.loads(json.dumps(s.to_dict()))
    assert ExperimentSpec.from_dict(d) == s and ExperimentSpec.from_dict(d).key() == s.key()
    assert len(s.key()) == 16 and s.key() != ExperimentSpec().key()
    assert s.replace(n_layer=2).key() == s.key()
    with pytest.raises(ValueError, match=r"unknown ExperimentSpec field\(s\) \['n_layers'\]"):
        ExperimentSpec.from_dict({"n_layers": 2})


def test_parse_value():
    assert parse_value("vocab_tile", " 2048") == 2048 and parse_value("seq_tile", "none") is None
    assert parse_value("lr", "3e-4") == 3e-4 and parse_value("priorities", "on") is True
    assert parse_value("scheduler", "dmda") == "dmda"
    with pytest.raises(ValueError, match="--vocab-tile 'big': not a valid int"):
        parse_value("vocab_tile", "big")
    with pytest.raises(ValueError, match="unknown ExperimentSpec field 'tile'"):
        parse_value("tile", "1")


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 6), h=st.integers(1, 4), hs=st.integers(1, 16), V=st.integers(2, 500),
       T=st.integers(1, 64), B=st.integers(1, 8), acc=st.integers(1, 3))
def test_counts_agree_with_the_model_config(L, h, hs, V, T, B, acc):
    s = ExperimentSpec(n_layer=L, n_head=h, n_embd=h * hs, vocab_size=V, seq_len=T, batch=B,
                       grad_accum=acc)
    cfg = s.gpt2_config()
    assert isinstance(cfg, GPT2Config) and cfg.n_inner == 4 * h * hs == s.inner
    assert cfg.n_positions == T and cfg.vocab_tile == min(8192, V)
    assert s.num_params() == cfg.num_params()
    e, n = h * hs, V * h * hs + L * (12 * (h * hs) ** 2 + 13 * h * hs) + 2 * h * hs
    assert s.num_params() == n                      # the closed form, independently
    assert s.flops_per_step() == pytest.approx((6 * n + 12 * L * e * T) * B * T * acc)
    assert cfg.flops_per_token(T) * B * T * acc == s.flops_per_step()


@pytest.mark.parametrize("text", ["maybe", "2", "y e s", ""])
def test_a_yes_no_field_refuses_anything_else(text):
    """bool("maybe") is True: --priorities maybe used to sweep with priorities on."""
    with pytest.raises(ValueError, match=rf"--priorities {text!r}: not a yes/no value"):
        parse_value("priorities", text)


@pytest.mark.parametrize("word", ["none", "all", "auto"])
def test_a_hint_set_word_stands_alone(word):
    """'none,invalidate' called none unknown, then listed it as valid."""
    from nntile_lab.spec import parse_hints
    with pytest.raises(ValueError, match=rf"'{word}' stands alone, not in a list with other "
                                         r"hints; give '\w+' or a comma list of invalidate"):
        parse_hints(f"invalidate,{word}")
    with pytest.raises(ValueError, match="--hints"):
        ExperimentSpec(hints=f"{word},wont_use")
    assert parse_hints("invalidate,wont_use") == {"invalidate", "wont_use"}
