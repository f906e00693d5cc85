"""``nntile-lab sample``: text from a trained run (or a Hugging Face GPT-2 state dict),
streamed as it is generated, with prefill and decode tokens/s at the end.

    nntile-lab sample --from runs/X --prompt "def main(" --max-new-tokens 100
    nntile-lab sample --from gpt2/model.safetensors --prompt-file p.txt --greedy --json

Ctrl-C stops within a second: the text so far stays printed, exit 130.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nntile_lab import spec as specs
from nntile_lab.errors import UsageError
from nntile_lab.generate import Sampling, left_pad
from nntile_lab.nn.config import GPT2Config
from nntile_lab.options import INT_MAX, float_range, int_range
from nntile_lab.sample.load import read_weights
from nntile_lab.sample.text import encode, sample_text

DEFAULT_NEW_TOKENS = 100
# the spec's options sample does not take: no CUDA workers (generation runs on the CPU and
# OpenCL workers), no priorities (no backward), batch and sequence tiles from the prompts
SKIPPED = ("priorities", "ncuda", "cuda_memory_limit_mb", "batch_tile", "seq_tile")
RUNTIME_FIELDS = tuple(f.name for f in specs.spec_fields("runtime") if f.name not in SKIPPED)
# Tiles of generation (docs/generation.md): whole embedding and batch tiles (a decode step
# is B×1 tokens), the training defaults elsewhere; the cache in one position tile
GEN_TILES = {"embd_tile": None, "inner_tile": 512, "head_tile": 2, "vocab_tile": 8192,
             "batch_tile": None, "seq_tile": None}


def register_cli(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sample", help="generate text from a run or a GPT-2 state dict",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", required=True, metavar="PATH",
                   help="a run directory of `nntile-lab train` (or its checkpoint), or a "
                        "Hugging Face GPT-2 model.safetensors / pytorch_model.bin")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prompt", default=None, help="the text to continue (default: from "
                   "nothing, the end-of-text token)")
    g.add_argument("--prompt-file", metavar="FILE", help="read the prompt from FILE")
    s = p.add_argument_group("sampling")
    s.add_argument("--max-new-tokens", type=int_range(1), default=None, metavar="N",
                   help=f"tokens to generate per sample (default {DEFAULT_NEW_TOKENS}, or as "
                        "many as the model's positions leave after the prompt)")
    s.add_argument("--num-samples", type=int_range(1), default=1, metavar="N",
                   help="samples, one after another (default 1)")
    s.add_argument("--greedy", action="store_true", help="the most likely token each step")
    s.add_argument("--temperature", type=float_range(0, lo_open=True), default=1.0, metavar="T",
                   help="sampling temperature, > 0 (default 1.0)")
    s.add_argument("--top-k", type=int_range(1), default=None, metavar="K", help="keep the K most "
                   "likely tokens (default all)")
    s.add_argument("--top-p", type=float_range(0, 1, lo_open=True), default=None, metavar="P",
                   help="nucleus: the most likely tokens holding mass P (default 1: all)")
    s.add_argument("--seed", type=int_range(0), default=None, metavar="S",
                   help="reproducible samples (sample i uses S + i)")
    s.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop a sample once its text contains TEXT (repeatable)")
    s.add_argument("--n-head", type=int_range(1), default=None,
                   help="heads of a Hugging Face file without config.json (default n_embd/64)")
    s.add_argument("--cache-tile", type=int_range(1), default=None, metavar="N",
                   help="positions per KV-cache tile (default: all of n_positions)")
    specs.add_arguments(p, ("tiles", "runtime"), skip=SKIPPED)
    p.add_argument("--json", action="store_true",
                   help="JSON Lines: one {\"sample\", \"text\"} per piece, the result last")
    p.set_defaults(func=run_cli)
    return p


def _sampling(args) -> dict:
    """The sampling options (each in its range already: argparse's types)."""
    kw = dict(greedy=args.greedy, temperature=args.temperature, top_k=args.top_k,
              top_p=args.top_p)
    Sampling(**kw)   # the library's own check: the same rules
    return kw


def _prompt(args) -> str:
    if args.prompt_file is None:
        return "" if args.prompt is None else args.prompt
    try:
        return Path(args.prompt_file).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--prompt-file {args.prompt_file!r}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"--prompt-file {args.prompt_file!r}: {exc.strerror or exc}") from None


def model_config(sizes: dict, tiles: dict):
    """A ``GPT2Config`` of the weights' sizes with generation's tiles (given ones first)."""
    fields = {k: sizes[k] for k in ("n_layer", "n_head", "n_embd", "n_positions",
                                    "vocab_size", "n_inner", "layer_norm_epsilon")
              if k in sizes}
    chosen = {k: (tiles.get(k) if tiles.get(k) is not None else v) for k, v in GEN_TILES.items()}
    caps = {"embd_tile": fields["n_embd"], "inner_tile": fields.get("n_inner") or
            4 * fields["n_embd"], "head_tile": fields["n_head"], "vocab_tile":
            fields["vocab_size"]}
    for k, cap in caps.items():
        if chosen[k] is not None and k not in {t for t, v in tiles.items() if v is not None}:
            chosen[k] = min(chosen[k], cap)    # a default never exceeds its dimension
    try:
        return GPT2Config(**fields, **chosen)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).split('=')[0].replace('_', '-')}: {exc}") from None


def run_cli(args) -> int:
    # every option that needs no weights first: one line, exit 2, before any file is read
    sampling = _sampling(args)
    prompt = _prompt(args)
    tiles = {k: getattr(args, k, None) for k in GEN_TILES}
    for k, v in tiles.items():
        if v is not None and not 1 <= v <= INT_MAX:
            raise UsageError(f"--{k.replace('_', '-')} {v}: a tile is a number of elements "
                             f"from 1 to {INT_MAX:,} (leave it out for the default)")
    rt_kw = {k: getattr(args, k) for k in RUNTIME_FIELDS if getattr(args, k, None) is not None}
    try:
        runtime_spec = specs.ExperimentSpec.from_dict(rt_kw)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # the compiled extension: loaded here, so that --help and parsing work without it
    from nntile_lab.runtime import check_scheduler
    check_scheduler(runtime_spec.scheduler)     # a mistyped policy: exit 2, before any work
    try:   # a path that is not weights is a bad --from: one line, exit 2
        weights = read_weights(args.source, n_head=args.n_head)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    config = model_config(weights.sizes, tiles)
    ids = encode(prompt)
    if args.max_new_tokens is None:   # the default: as many as fit, up to 100
        args.max_new_tokens = max(1, min(DEFAULT_NEW_TOKENS, config.n_positions - len(ids) + 1))
    # the prompt against the model before StarPU starts
    try:
        left_pad([ids], vocab_size=config.vocab_size, n_positions=config.n_positions,
                 max_new_tokens=args.max_new_tokens)
    except ValueError as exc:
        raise UsageError(f"--prompt: {exc}" if "max_new_tokens" not in str(exc)
                         else f"--max-new-tokens {args.max_new_tokens}: {exc}") from None
    return _generate(args, weights, config, prompt, sampling, runtime_spec)


def _generate(args, weights, config, prompt, sampling, runtime_spec) -> int:
    # the model and the runtime load the compiled extension: importing this module must not
    from nntile_lab.nn import GPT2
    from nntile_lab.runtime import Runtime

    out = sys.stdout
    results, interrupted = [], False
    print(f"nntile-lab sample: {weights.kind} {weights.source}: {config.n_layer} layers, "
          f"n_embd {config.n_embd}, {config.n_head} heads, vocabulary {config.vocab_size}, "
          f"{config.n_positions} positions", file=sys.stderr)
    with Runtime(**runtime_spec.runtime_kwargs()):
        model = GPT2(config)
        try:
            model.load_state_dict(weights.state)
        except ValueError as exc:    # a state dict of another shape than its config says
            raise UsageError(f"--from {weights.source}: {exc}") from None
        for i in range(args.num_samples):
            if args.json:
                def on_text(piece, i=i):
                    print(json.dumps({"sample": i, "text": piece}), file=out, flush=True)
            else:
                if i:
                    print("\n---------------", file=out)
                print(prompt, end="", file=out, flush=True)

                def on_text(piece):
                    print(piece, end="", file=out, flush=True)
            seed = None if args.seed is None else args.seed + i
            s = sample_text(model, prompt, args.max_new_tokens, on_text=on_text,
                            stop_strings=args.stop, seed=seed, cache_tile=args.cache_tile,
                            **sampling)
            results.append(s)
            if not args.json:
                print(file=out, flush=True)
            _report(s, sys.stderr)
            if s.interrupted:
                interrupted = True
                break
    if args.json:
        print(json.dumps({"source": weights.source, "config": config.to_dict(),
                          "samples": [s.record() for s in results],
                          "interrupted": interrupted}), file=out, flush=True)
    if interrupted:
        n = len(results[-1].tokens)
        print(f"nntile-lab: interrupted after {n} new tokens of sample {len(results) - 1}; the "
              "text so far is printed above", file=sys.stderr)
        return 130
    return 0


def _report(s, err) -> None:
    g = s.generation
    print(f"[prefill {g.prefill_tokens} tokens in {g.prefill_seconds:.3f} s: "
          f"{g.prefill_tokens_per_s:.1f} tokens/s; decode {g.decode_tokens} tokens in "
          f"{g.decode_seconds:.3f} s: {g.decode_tokens_per_s:.1f} tokens/s; "
          f"{'interrupted' if s.interrupted else g.finish[0]}]", file=err, flush=True)
