"""``nntile-lab train --ranks N``: the mpirun line that runs training on N local ranks.

The parent process fixes what every rank must agree on before mpirun starts them: the run
directory (one timestamp), the prepared corpus (prepared once, not raced by N ranks) and one
StarPU CPU worker per rank (``--ncpu 1`` unless given: the ranks share this machine's cores).
Under mpirun, rank 0 writes the run directory; rank r > 0 computes the same steps (SPMD) and
writes its copies into ``OUT/.rank<r>``, which nobody reads.
"""
from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys

from nntile_lab.data import prepare_default_corpus
from nntile_lab.parallel.mpirun import mpirun_command


def _strip(argv: list[str], option: str, takes_value: bool = True) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == option:
            skip = takes_value
            continue
        if a.startswith(option + "="):
            continue
        out.append(a)
    return out


def _has(argv: list[str], option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in argv)


def train_command(argv: list[str], ranks: int) -> list[str]:
    """The mpirun line for ``nntile-lab train`` with ``argv`` (its options) on ``ranks``."""
    if ranks < 2:
        raise ValueError(f"--ranks {ranks}: give 2 or more (1 is the ordinary run)")
    argv = _strip(_strip(argv, "--ranks"), "--print-mpirun", takes_value=False)
    if not _has(argv, "--ncpu"):
        argv += ["--ncpu", "1"]
    if not _has(argv, "--out") and not _has(argv, "--resume"):
        argv += ["--out", f"runs/{datetime.datetime.now():%Y%m%d-%H%M%S}"]
    env = {"NNTILE_LAB_MPI": "1", "STARPU_NCPU": "1", "STARPU_SILENT": "1"}
    return mpirun_command(ranks, [sys.executable, "-m", "nntile_lab.cli", "train", *argv],
                          extra_env=env)


def relaunch_train(args) -> int:
    """Start (or with ``--print-mpirun`` only print) the mpirun line for this ``train``."""
    if args.ranks < 2:
        raise ValueError(f"--ranks {args.ranks}: give 2 or more (1 is the ordinary run)")
    argv = sys.argv[1:]
    if "train" not in argv:
        raise ValueError("--ranks needs the command line of `nntile-lab train`")
    argv = argv[argv.index("train") + 1:]
    cmd = train_command(argv, args.ranks)
    line = shlex.join(cmd)
    if args.print_mpirun:
        print(line)
        return 0
    if not _has(argv, "--data"):   # prepare the default corpus once, before N ranks read it
        prepare_default_corpus()
    print(f"nntile-lab: {line}", file=sys.stderr, flush=True)
    return subprocess.run(cmd).returncode


def for_this_rank(args):
    """Under mpirun: rank r > 0 writes into OUT/.rank<r> and prints nothing per step."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    if rank > 0:
        args.out = os.path.join(args.out, f".rank{rank}")
        args.no_progress, args.json, args.quiet_rank = True, False, True
    return args
