"""The ``train`` CLI command: build the tiled GPT-2 and its optimizer, train, plot, record.

``nntile-lab train`` with no options is the main job: a 4-layer, 256-wide GPT-2 with the
full GPT-2 vocabulary on the default corpus (the Python standard library's source), a few
minutes on 2 cores.  With ``--resume DIR`` the model shape, ``--seq-len`` and ``--batch``
default to the checkpoint's, so ``nntile-lab train --resume runs/X`` just continues.
"""
from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from nntile_lab.train.checkpoint import config_dict, find_checkpoint, read_state
from nntile_lab.train.schedule import WarmupCosine

# Model shape and batch: None on the command line means "the checkpoint's, or this".
SHAPE_DEFAULTS = {"n_layer": 4, "n_head": 4, "n_embd": 256, "vocab_size": 50257}
RUN_DEFAULTS = {"seq_len": 128, "batch": 8}
TILES = ("batch_tile", "seq_tile", "embd_tile", "inner_tile", "head_tile", "vocab_tile")
# Tiles for options left out, capped at each dimension: enough tasks in the big
# products (vocabulary head, MLP) to keep 2-4 workers busy. Measured on 2 cores,
# L4/E256/T128/B8: 124 GFLOP/s against 46 with whole-dimension tiles.
TILE_DEFAULTS = {"batch_tile": 4, "inner_tile": 512, "head_tile": 2, "vocab_tile": 8192}
OPTIMIZERS = ("adamw", "adam", "sgd")


def add_model_arguments(p: argparse.ArgumentParser, title: str) -> None:
    """The model shape, batch and tile options (shared with ``bench train``)."""
    m = p.add_argument_group(title)
    for name, default in (SHAPE_DEFAULTS | RUN_DEFAULTS).items():
        m.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, metavar="N",
                       help=f"default {default}")
    t = p.add_argument_group("tiles (default: " + ", ".join(
        f"{k} {v}" for k, v in TILE_DEFAULTS.items()) + ", whole dimension for the rest)")
    for name in TILES:
        t.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, metavar="N")


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "train", help="train the tiled GPT-2 (defaults: the main job)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p, "model (default: the checkpoint's with --resume, else as shown)")
    o = p.add_argument_group("optimisation")
    o.add_argument("--steps", type=int, default=300, metavar="N",
                   help="total optimizer steps, counting those before --resume (default 300)")
    o.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    o.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    o.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="linear warm-up steps (default steps/10)")
    o.add_argument("--min-lr", type=float, default=1e-4,
                   help="cosine decay floor (default 1e-4)")
    o.add_argument("--weight-decay", type=float, default=None,
                   help="default 0.1 for adam/adamw, 0 for sgd")
    o.add_argument("--grad-accum", type=int, default=1, metavar="N",
                   help="micro-batches per optimizer step (default 1)")
    o.add_argument("--clip", type=float, default=1.0,
                   help="global gradient-norm clip, 0 for none (default 1.0)")
    o.add_argument("--seed", type=int, default=0, help="weights and batch sampling (default 0)")
    r = p.add_argument_group("run")
    r.add_argument("--data", metavar="DIR",
                   help="prepared dataset (default: the standard-library corpus)")
    r.add_argument("--out", metavar="DIR",
                   help="run directory (default runs/<timestamp>; with --resume, its run)")
    r.add_argument("--resume", metavar="DIR", help="continue from a run or checkpoint dir")
    r.add_argument("--eval-every", type=int, default=50, metavar="N",
                   help="validation every N steps and at the end, 0 for none (default 50)")
    r.add_argument("--eval-batches", type=int, default=10, metavar="N",
                   help="validation batches (default 10)")
    r.add_argument("--checkpoint-every", type=int, default=100, metavar="N",
                   help="checkpoint every N steps, 0 for only at the end (default 100)")
    r.add_argument("--scheduler", default="lws", help="StarPU scheduler (default lws)")
    r.add_argument("--ncpu", type=int, default=None, help="StarPU CPU workers")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object per logged step and a final summary")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_cli)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the options left at None: from the checkpoint when resuming, else defaults."""
    args = argparse.Namespace(**vars(args))
    saved = read_state(args.resume) if args.resume else {}
    cfg, settings = saved.get("config", {}), saved.get("settings", {})
    for name, default in SHAPE_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, cfg.get(name, default))
    for name, default in RUN_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, settings.get(name, default))
    args.n_positions = cfg.get("n_positions", args.seq_len)
    if args.warmup is None:
        args.warmup = args.steps // 10
    if args.weight_decay is None:
        args.weight_decay = 0.0 if args.optimizer == "sgd" else 0.1
    if args.out is None:
        args.out = (str(find_checkpoint(args.resume).parent) if args.resume else
                    f"runs/{datetime.datetime.now():%Y%m%d-%H%M%S}")
    return args


def model_config_kwargs(args: argparse.Namespace) -> dict:
    """``GPT2Config`` keyword arguments from resolved options (tiles only where given)."""
    kw = {name: getattr(args, name) for name in SHAPE_DEFAULTS}
    kw["n_positions"] = args.n_positions
    limits = {"batch_tile": args.batch, "inner_tile": 4 * args.n_embd, "head_tile": args.n_head,
              "vocab_tile": args.vocab_size}
    for name in TILES:
        given = getattr(args, name)
        if given is not None:
            kw[name] = given
        elif name in TILE_DEFAULTS:
            kw[name] = min(TILE_DEFAULTS[name], limits[name])
    return kw


def make_schedule(args: argparse.Namespace) -> WarmupCosine:
    return WarmupCosine(args.lr, args.warmup, args.steps, min(args.min_lr, args.lr))


def build(args: argparse.Namespace):
    """``(model, optimizer, schedule)`` for resolved options; call inside a running Runtime."""
    from nntile_lab.nn import GPT2, GPT2Config
    from nntile_lab.optim import SGD, Adam, AdamW

    model = GPT2(GPT2Config(**model_config_kwargs(args)), seed=args.seed)
    if args.optimizer == "sgd":
        opt = SGD(model, lr=args.lr, momentum=0.9, weight_decay=args.weight_decay)
    else:
        cls = AdamW if args.optimizer == "adamw" else Adam
        opt = cls(model, lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                  weight_decay=args.weight_decay)
    return model, opt, make_schedule(args)


def run_cli(args: argparse.Namespace) -> int:
    """Run ``train`` for parsed arguments; return the process exit code."""
    import nntile_lab
    from nntile_lab.data import prepare_default_corpus
    from nntile_lab.train.plots import save_loss_plot
    from nntile_lab.train.record import write_run_record
    from nntile_lab.train.trainer import train

    args = resolve(args)
    data = Path(args.data) if args.data else prepare_default_corpus()
    with nntile_lab.Runtime(scheduler=args.scheduler, ncpu=args.ncpu) as rt:
        model, optimizer, schedule = build(args)
        log = train(model, optimizer, data, steps=args.steps, batch=args.batch,
                    seq_len=args.seq_len, out_dir=args.out, schedule=schedule,
                    grad_accum=args.grad_accum, clip_norm=args.clip or None,
                    eval_every=args.eval_every, eval_batches=args.eval_batches,
                    checkpoint_every=args.checkpoint_every, resume=args.resume,
                    seed=args.seed, progress=not args.no_progress, json_lines=args.json)
        model_config = config_dict(model.config)
        ncpu = rt.ncpu
    summary = log.attrs["summary"]
    save_loss_plot(log, args.out, title=f"GPT-2 L={args.n_layer} E={args.n_embd} "
                   f"T={args.seq_len} B={args.batch}")
    options = {k: v for k, v in vars(args).items() if k != "func"}
    write_run_record(args.out, {"model": model_config, "options": options, "data": str(data),
                                "runtime": {"scheduler": args.scheduler, "ncpu": ncpu}},
                     {k: v for k, v in summary.items() if k != "summary"})
    if not args.json:
        print(_report(summary))
    return 0


def _report(s: dict) -> str:
    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    return (f"{s['out_dir']}: {s['steps']} steps, loss {num(s['final_loss'], '.4f')}, "
            f"val loss {num(s['final_val_loss'], '.4f')} (best {num(s['best_val_loss'], '.4f')})"
            f", {num(s['tokens_per_s'], '.0f')} tokens/s, {num(s['gflops'], '.2f')} GFLOP/s; "
            f"wrote log.csv, loss.png, run.json, checkpoint/")



def run_for_trace(train_argv: list[str], steps: int, profiling: bool = True,
                  bound: bool = False):
    """``steps`` training steps of the model that ``train_argv`` describes, under a
    Trace (after one untraced warm-up step). Returns the stopped trace, memory by
    category and tokens per step, for ``nntile-lab trace``."""
    import numpy as np

    import nntile_lab
    from nntile_lab.data import load_split, prepare_default_corpus
    from nntile_lab.trace import Trace

    sub = argparse.ArgumentParser(prog="nntile-lab trace --").add_subparsers()
    args = resolve(register_cli(sub).parse_args(train_argv))
    data = load_split(Path(args.data) if args.data else prepare_default_corpus(), "train")
    rng = np.random.default_rng(args.seed)
    tokens = args.batch * args.seq_len * args.grad_accum
    with nntile_lab.Runtime(scheduler=args.scheduler, ncpu=args.ncpu,
                            profiling=profiling) as rt:
        model, optimizer, schedule = build(args)

        def step(k: int) -> None:
            for micro in range(args.grad_accum):
                ids, labels = data.sample_batch(args.batch, args.seq_len, rng)
                model.forward_backward(ids, labels, accumulate=micro > 0,
                                       grad_scale=1.0 / args.grad_accum)
            optimizer.step(schedule(k), args.clip or None)
            rt.wait()

        step(0)
        tr = Trace(rt, bound=bound).start()
        for k in range(1, steps + 1):
            step(k)
            tr.mark_step(tokens)
        memory = tr.memory_by_category(model, optimizer)
        tr.stop()
    return tr, memory, tokens
