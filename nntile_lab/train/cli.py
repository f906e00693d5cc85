"""The ``train`` CLI command: build the tiled GPT-2 and its optimizer, train, plot, record.

``nntile-lab train`` with no options is the main job: a 4-layer, 256-wide GPT-2 with the
full GPT-2 vocabulary on the default corpus (the Python standard library's source), a few
minutes on 2 cores.  With ``--resume DIR`` the model shape, ``--seq-len`` and ``--batch``
default to the checkpoint's, so ``nntile-lab train --resume runs/X`` just continues.
The options are the fields of ``nntile_lab.spec.ExperimentSpec`` (one set of defaults).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from nntile_lab import memory
from nntile_lab import spec as specs
from nntile_lab.data import prepare_default_corpus
from nntile_lab.engine import save_record
from nntile_lab.errors import UsageError
from nntile_lab.experiment import build as build_spec
from nntile_lab.experiment import runtime
from nntile_lab.nn.config import model_of_fields
from nntile_lab.options import int_range
from nntile_lab.parallel import traffic as network
from nntile_lab.parallel.distribution import LAYOUTS, layout, scope
from nntile_lab.parallel.launch import for_this_rank, relaunch_train, wants_launch
from nntile_lab.parallel.mpirun import under_mpirun
from nntile_lab.train.checkpoint import (
    atomic_write_text,
    clean_stale,
    config_dict,
    find_checkpoint,
    load_checkpoint,
    read_state,
)
from nntile_lab.train.plots import save_loss_plot
from nntile_lab.train.resume import resumed_schedule
from nntile_lab.train.trainer import restore_log, train

TRAIN_GROUPS = ("model", "data", "tiles", "runtime", "train", "run")
# What a checkpoint fixes: the model's shape (its config) and the batch shape (its settings).
SHAPE_FIELDS = ("n_layer", "n_head", "n_embd", "vocab_size", "n_inner", "n_positions",
                "n_kv_head", "rope_theta", "rms_norm_eps")
BATCH_FIELDS = ("seq_len", "batch")


def register_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "train", help="train the tiled GPT-2 (defaults: the main job)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    specs.add_arguments(p, TRAIN_GROUPS, titles={
        "model": "model (default: the checkpoint's with --resume, else as shown)",
        "train": "optimisation", "run": "evaluation and checkpoints"})
    r = p.add_argument_group("run")
    r.add_argument("--data", metavar="DIR",
                   help="prepared dataset (default: the standard-library corpus)")
    r.add_argument("--out", metavar="DIR",
                   help="run directory (default runs/<timestamp>; with --resume, its run)")
    r.add_argument("--resume", metavar="DIR", help="continue from a run or checkpoint dir "
                   "(on the checkpoint's data unless --data and --allow-data-change)")
    r.add_argument("--allow-data-change", action="store_true",
                   help="with --resume: continue on --data other than the checkpoint's")
    r.add_argument("--reschedule", action="store_true",
                   help="with --resume: follow the learning-rate schedule these options give "
                        "(e.g. a cosine stretched to a new --steps) instead of the checkpoint's")
    r.add_argument("--json", action="store_true",
                   help="print one JSON object per logged step and a final summary")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    d = p.add_argument_group("distributed (StarPU-MPI; nntile_lab.parallel.launch)")
    d.add_argument("--ranks", type=int_range(1), default=None, metavar="N",
                   help="train on N MPI ranks: starts mpirun (or srun in a Slurm allocation; "
                        "default there: SLURM_NTASKS)")
    d.add_argument("--hosts", metavar="H[:S],...",
                   help="run the ranks on these hosts, S slots each (mpirun --host)")
    d.add_argument("--hostfile", metavar="FILE", help="Open MPI hostfile (mpirun --hostfile)")
    d.add_argument("--launcher", choices=("auto", "mpirun", "srun"), default="auto",
                   help="auto: srun inside a Slurm allocation, else mpirun")
    d.add_argument("--layout", choices=LAYOUTS, default=None,
                   help="how the ranks share the work: operator (tiles spread tile-cyclic; "
                        "default), operator-2d (block-cyclic on a 2-D rank grid), data (each "
                        "rank its part of the batch)")
    d.add_argument("--tcp", action="store_true",
                   help="Open MPI over TCP only (no shared memory), as between machines")
    d.add_argument("--print-mpirun", action="store_true",
                   help="print the launch line (mpirun or srun) instead of running it")
    p.set_defaults(func=run_cli)
    _register_plan(subparsers)
    return p


# ---- ``nntile-lab plan``: will a training run fit (nntile_lab.memory) -----------------
PLAN_GROUPS = ("model", "data", "tiles", "runtime")


def _register_plan(subparsers) -> None:
    """``nntile-lab plan [model options] --memory-limit-mb N [--ooc-dir D] [--json]``."""
    p = subparsers.add_parser("plan", help="will a training run fit in memory (or with disk)?",
                              description=memory.__doc__.split("\n\n")[0])
    specs.add_arguments(p, PLAN_GROUPS)
    p.add_argument("--optimizer", choices=specs.OPTIMIZERS, default=None, help="default adamw")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.set_defaults(func=_plan)


def _plan(args) -> int:
    spec = specs.from_args(args, PLAN_GROUPS)
    # a plan for a policy StarPU does not have would be a verdict on a run that cannot start;
    # the policies are StarPU's to list (the compiled extension): a plan is also made where
    # the extension is not built, and then the run itself checks the name
    try:
        from nntile_lab.runtime import check_scheduler
    except ImportError:
        built = False
    else:
        built = True
        check_scheduler(spec.scheduler)
    chosen = None
    if spec.precision == "auto" and built:
        # the mode a run would take here, chosen as train chooses it (the GEMM peaks
        # measured, seconds): sizing fp32 planned 63.9 MiB for a run that took bf16's 57.5
        from nntile_lab.experiment import choose_precision
        mode, why = choose_precision(spec)
        chosen = {"mode": mode, "why": why}
        spec = spec.replace(precision=mode)
    plan = memory.estimate(spec, optimizer=args.optimizer)
    if chosen:
        plan.details["precision_auto"] = chosen
    if args.json:
        print(json.dumps(plan.to_dict()))
    else:
        if chosen:
            print(f"precision auto -> {chosen['mode']} on this machine: {chosen['why']}")
        print(plan.report())
    return 1 if plan.verdict == "cannot_run" else 0


def checkpoint_values(resume) -> dict:
    """The spec fields a checkpoint fixes (its model shape, batch and sequence length) and
    the precision mode it trained in (a bf16 run resumed without --precision continued in
    fp32): defaults under the options given."""
    if not resume:
        return {}
    saved = read_state(resume)
    cfg, settings = saved.get("config", {}), saved.get("settings", {})
    precision = settings.get("precision") or _recorded_precision(resume)
    model = model_of_fields(cfg)   # which model the saved config is (its fields say)
    return ({k: cfg[k] for k in SHAPE_FIELDS if k in cfg}
            | ({"model": model} if model else {})
            | {k: settings[k] for k in BATCH_FIELDS if k in settings}
            | ({"precision": precision} if precision else {}))


def _recorded_precision(resume) -> str | None:
    """The mode an older checkpoint's run trained in, from its run.json (checkpoints hold it
    in their settings since it was missed on resume)."""
    run_json = find_checkpoint(resume).parent / "run.json"
    try:
        mode = (json.loads(run_json.read_text()).get("config", {}).get("precision") or {})
    except (OSError, ValueError):
        return None
    return mode.get("mode") if isinstance(mode, dict) else None


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Options as a spec (``args.spec``: given > the checkpoint's > defaults), with every
    spec field's resolved value also set on the namespace, and the run directory."""
    args = argparse.Namespace(**vars(args))
    spec = specs.from_args(args, TRAIN_GROUPS, base=checkpoint_values(args.resume))
    # the compiled extension: imported here so that --help and parsing work without it
    from nntile_lab.runtime import check_scheduler
    check_scheduler(spec.scheduler)
    for name, value in spec.to_dict().items():
        setattr(args, name, value)
    args.n_positions, args.n_inner = spec.positions, spec.inner
    args.warmup, args.weight_decay = spec.warmup_resolved, spec.weight_decay_resolved
    args.spec = spec
    if args.out is None:
        args.out = (str(find_checkpoint(args.resume).parent) if args.resume else
                    f"runs/{datetime.datetime.now():%Y%m%d-%H%M%S}")
    return args


def build(spec: specs.ExperimentSpec):
    """``(model, optimizer, schedule)`` for a spec; call inside a running Runtime. (A name
    in this module so the CLI tests can swap in a PyTorch model.)"""
    return build_spec(spec)


def run_cli(args: argparse.Namespace) -> int:
    """Run ``train`` for parsed arguments; return the process exit code."""
    if wants_launch(args) or args.print_mpirun:
        resume_dir = str(find_checkpoint(args.resume).parent) if args.resume else None
        return relaunch_train(args, resume_dir=resume_dir, checkpoint_note=_last_checkpoint)
    if args.layout is not None and not under_mpirun():
        raise UsageError(f"--layout {args.layout} shares the work between ranks: give "
                         "--ranks N (2 or more), or leave it out for one process")
    args = resolve(args)
    args = for_this_rank(args)
    spec = args.spec
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {args.out} is a file, not a directory: give a directory for "
                         "the run (log.csv, checkpoint/, loss.png, run.json)")
    if args.resume and (done := _already_done(args.resume, spec.steps)):
        print(done)
        return 0
    data = _data_dir(args, prepare_default_corpus)
    keep = None
    if args.reschedule and not args.resume:
        raise ValueError("--reschedule applies only with --resume (it chooses the schedule "
                         "a resumed run follows)")
    if args.resume:
        planned = spec.schedule()
        chosen, message = resumed_schedule(read_state(args.resume), find_checkpoint(args.resume),
                                           planned, args.reschedule, spec.steps)
        keep = None if chosen is planned else chosen
        if message:
            print(f"nntile-lab train: {message}", file=sys.stderr)
    with runtime(spec) as rt:
        for_model, for_steps = layout(args.layout or "operator", rt.mpi.size if rt.mpi else 1)
        with scope(rt.mpi, for_model):
            model, optimizer, schedule = build(spec)
        schedule = keep or schedule
        sent = network.Traffic(rt.mpi) if rt.mpi else None
        with scope(rt.mpi, for_steps):
            log = train(model, optimizer, data, steps=spec.steps, batch=spec.batch,
                        seq_len=spec.seq_len, out_dir=args.out, schedule=schedule,
                        grad_accum=spec.grad_accum, clip_norm=spec.clip or None,
                        eval_every=spec.eval_every, eval_batches=spec.eval_batches,
                        checkpoint_every=spec.checkpoint_every, resume=args.resume,
                        seed=spec.seed, progress=not args.no_progress, json_lines=args.json,
                        on_mark=sent.mark if sent else None)
        comm = sent.gather() if sent else None   # every rank; the table on rank 0
        model_config = config_dict(model.config)
        ncpu = rt.ncpu
    if comm is not None:
        atomic_write_text(Path(args.out) / "comm.csv", comm.to_csv(index=False))
    summary = log.attrs["summary"]
    save_loss_plot(log, args.out, title=f"GPT-2 L={spec.n_layer} E={spec.n_embd} "
                   f"T={spec.seq_len} B={spec.batch}")
    options = {k: v for k, v in vars(args).items() if k not in ("func", "spec")}
    save_record(Path(args.out) / "run.json", "train", spec,
                {k: v for k, v in summary.items() if k != "summary"},
                config={"model": model_config, "options": options, "data": str(data),
                         "precision": getattr(model, "precision_choice", None),
                         "runtime": {"scheduler": spec.scheduler, "ncpu": ncpu}})
    if not args.json and not getattr(args, "quiet_rank", False):
        print(_report(summary))
        if comm is not None:
            print(network.report(comm))
    return 0


def _last_checkpoint(run_dir) -> str:
    """Where a stopped multi-rank run can continue from (a sentence; every file of the
    checkpoint read and checked against its manifest)."""
    try:
        ckpt = load_checkpoint(run_dir)
    except FileNotFoundError:
        return f"No checkpoint in {run_dir} yet."
    except ValueError as exc:
        return f"The last checkpoint is damaged: {exc}"
    return (f"The last checkpoint ({ckpt.path}, step {ckpt.state['step']}) is intact: continue "
            f"with --resume {run_dir}.")


def _already_done(resume, steps: int) -> str | None:
    """A message if the checkpoint already reached ``steps`` (then nothing is changed)."""
    state = read_state(resume)
    saved = state["step"]
    if steps > saved:
        return None
    run_dir = find_checkpoint(resume).parent
    # a killed save's leftovers go, as at the start of any run in this directory, and a
    # log.csv that a kill left behind the checkpoint is brought up to it
    tidied = [p.name for p in clean_stale(run_dir)]
    if restore_log(run_dir, state):
        tidied.append("log.csv (restored from the checkpoint)")
    return (f"{find_checkpoint(resume)} is at step {saved}; --steps {steps} asks for no more: "
            f"nothing to do (give --steps above {saved} to continue)"
            + (f"; repaired what a killed run left: {', '.join(tidied)}" if tidied else ""))


def _data_dir(args: argparse.Namespace, default_corpus) -> Path:
    """The data to train on: --data; with --resume, the checkpoint's (a different --data
    needs --allow-data-change: the batches, hence the losses, would differ)."""
    if not args.resume:
        return Path(args.data) if args.data else default_corpus()
    saved = read_state(args.resume).get("data", {}).get("dir")
    if args.data is None:
        if saved is None:
            raise ValueError(f"checkpoint {find_checkpoint(args.resume)} does not record its "
                             "data directory: give --data")
        saved = Path(saved)
        if not saved.is_dir():
            default = default_corpus()
            if saved.resolve() != default.resolve():
                raise ValueError(f"the checkpoint's data directory {saved} is gone: restore "
                                 "it, or give --data DIR --allow-data-change")
        return saved
    given = Path(args.data)
    if (saved is not None and given.resolve() != Path(saved).resolve()
            and not args.allow_data_change):
        raise ValueError(f"--data {args.data} differs from the data the checkpoint was "
                         f"trained on ({saved}): resume without --data to continue on it, or "
                         "add --allow-data-change to train on the new data")
    return given


def _report(s: dict) -> str:
    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    return (f"{s['out_dir']}: {s['steps']} steps, loss {num(s['final_loss'], '.4f')}, "
            f"val loss {num(s['final_val_loss'], '.4f')} (best {num(s['best_val_loss'], '.4f')})"
            f", {num(s['tokens_per_s'], '.0f')} tokens/s, {num(s['gflops'], '.2f')} GFLOP/s; "
            f"wrote log.csv, loss.png, run.json, checkpoint/")
