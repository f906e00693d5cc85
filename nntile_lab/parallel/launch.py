"""``nntile-lab train --ranks N``: the launch line that runs training on N MPI ranks.

Where the ranks run:
  * this machine (default): ``mpirun -n N``;
  * several machines: ``--hosts a:2,b:2`` (host[:slots], comma list) or ``--hostfile FILE``
    (Open MPI's format, ``host slots=N`` per line) go to mpirun;
  * a Slurm allocation: ``--launcher srun`` (or ``auto`` inside an allocation when ``--ranks``
    is given) runs ``srun --ntasks N``, N defaulting to the allocation's ``SLURM_NTASKS``.
``--tcp`` makes Open MPI use TCP between every pair of ranks (``--mca pml ob1 --mca btl
tcp,self``: no shared memory, no InfiniBand), the path a cluster's Ethernet takes.

The parent process fixes what every rank must agree on before the ranks start: the run
directory (one timestamp), the prepared corpus (prepared once, not raced by N ranks) and one
StarPU CPU worker per rank (``--ncpu 1`` unless given: local ranks share this machine's
cores). Rank 0 writes the run directory; rank r > 0 computes the same steps (SPMD) and writes
its copies into ``OUT/.rank<r>``, which nobody reads. Across machines, the Python environment
and the data (``--data``, or the default corpus's cache) must be at the same paths on every
host: a shared file system, as clusters have.
"""
from __future__ import annotations

import datetime
import os
import shlex
import shutil
import subprocess
import sys

from nntile_lab.data import prepare_default_corpus
from nntile_lab.errors import UsageError
from nntile_lab.parallel.failures import Filter, diagnose
from nntile_lab.parallel.mpirun import mpirun_command, parse_hosts, read_hostfile

LAUNCHERS = ("auto", "mpirun", "srun")
RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
# options of the launch itself, removed from the ranks' command line: name -> takes a value
LAUNCH_OPTIONS = {"--ranks": True, "--print-mpirun": False, "--hosts": True,
                  "--hostfile": True, "--launcher": True, "--tcp": False}


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


def choose_launcher(launcher: str = "auto", hosts=None, hostfile=None, environ=os.environ) -> str:
    """mpirun or srun: ``auto`` takes srun inside a Slurm allocation (unless hosts are given)."""
    if launcher not in LAUNCHERS:
        raise UsageError(f"--launcher {launcher!r}: choose one of {', '.join(LAUNCHERS)}")
    if launcher == "auto":
        in_slurm = "SLURM_JOB_ID" in environ and shutil.which("srun") is not None
        return "srun" if in_slurm and not (hosts or hostfile) else "mpirun"
    if launcher == "srun" and (hosts or hostfile):
        raise UsageError("--hosts/--hostfile are for mpirun; under Slurm the allocation says "
                         "where the ranks run (drop them, or use --launcher mpirun)")
    if launcher == "srun" and shutil.which("srun") is None:
        raise UsageError("--launcher srun: there is no srun on PATH (not a Slurm cluster, or "
                         "Slurm's commands are not loaded): run inside a Slurm allocation, or "
                         "use --launcher mpirun")
    return launcher


def _slurm_ntasks(environ) -> int | None:
    text = environ.get("SLURM_NTASKS")
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"SLURM_NTASKS={text!r} (from the environment) is not a whole number: "
                         "give --ranks N, or fix the allocation (salloc --ntasks N)") from None
    if n < 2:
        raise UsageError(f"SLURM_NTASKS={text} (from the environment): the allocation has {n} "
                         "task; give --ranks N (2 or more), or allocate more (salloc --ntasks N)")
    return n


def train_command(argv: list[str], ranks: int | None, *, hosts: str | None = None,
                  hostfile: str | None = None, launcher: str = "mpirun", tcp: bool = False,
                  environ=os.environ) -> list[str]:
    """The launch line for ``nntile-lab train`` with ``argv`` (its options) on ``ranks``."""
    host_list = parse_hosts(hosts) if hosts else None
    hf = read_hostfile(hostfile) if hostfile else None
    if ranks is None:
        if launcher == "srun" and (n := _slurm_ntasks(environ)):
            ranks = n
        elif host_list or hf:
            # the count comes from the hosts' slots: name the option the user gave
            slots = sum(n for _, n in host_list) if host_list else hf.slots
            if slots < 2:
                given = f"--hosts {hosts!r}" if host_list else f"--hostfile {hostfile!r}"
                raise UsageError(f"{given}: {slots} slot in all; give --ranks N (2 or more) "
                                 "or more slots, or drop it for the ordinary run")
            ranks = slots
        else:
            raise UsageError("give --ranks N (or run under Slurm, or give --hosts/--hostfile)")
    if ranks < 2:
        raise UsageError(f"--ranks {ranks}: give 2 or more (1 is the ordinary run)")
    for option, takes_value in LAUNCH_OPTIONS.items():
        argv = _strip(argv, option, takes_value)
    if not _has(argv, "--ncpu"):
        argv += ["--ncpu", "1"]
    if not _has(argv, "--out") and not _has(argv, "--resume"):
        argv += ["--out", f"runs/{datetime.datetime.now():%Y%m%d-%H%M%S}"]
    env = {"NNTILE_LAB_MPI": "1", "STARPU_NCPU": "1", "STARPU_SILENT": "1"}
    program = [sys.executable, "-m", "nntile_lab.cli", "train", *argv]
    if launcher == "srun":
        srun = shutil.which("srun") or "srun"
        exports = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
        return [srun, "--ntasks", str(ranks), f"--export={exports}", *program]
    return mpirun_command(ranks, program, extra_env=env, hosts=hosts, hostfile=hf, tcp=tcp)


def wants_launch(args) -> bool:
    """Whether this ``train`` starts ranks (rather than being one)."""
    ranks = getattr(args, "ranks", None)
    return ((ranks is not None and ranks != 1) or bool(getattr(args, "hosts", None))
            or bool(getattr(args, "hostfile", None))
            or getattr(args, "launcher", "auto") == "srun")


def relaunch_train(args, *, resume_dir: str | None = None, checkpoint_note=None) -> int:
    """Start (or with ``--print-mpirun`` only print) the launch line for this ``train``.
    ``resume_dir``: the run directory a ``--resume`` continues in (the ranks write there);
    ``checkpoint_note(run_dir)``: a sentence on the last checkpoint, for the line that says
    why the ranks stopped."""
    if not wants_launch(args):
        raise UsageError("--print-mpirun prints the launch line of a run on several ranks: "
                         "give --ranks N (or --hosts/--hostfile, or --launcher srun)")
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    if "train" not in argv:
        raise UsageError("--ranks needs the command line of `nntile-lab train`")
    argv = argv[argv.index("train") + 1:]
    if resume_dir and not _has(argv, "--out"):
        argv += ["--out", resume_dir]
    launcher = choose_launcher(args.launcher, args.hosts, args.hostfile)
    if launcher == "srun" and args.tcp:
        raise UsageError("--tcp sets Open MPI's transports for mpirun; under srun set "
                         "OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self in the environment")
    cmd = train_command(argv, args.ranks, hosts=args.hosts, hostfile=args.hostfile,
                        launcher=launcher, tcp=args.tcp)
    line = shlex.join(cmd)
    if args.print_mpirun:
        print(line)
        return 0
    if not _has(argv, "--data"):   # prepare the default corpus once, before N ranks read it
        prepare_default_corpus()
    print(f"nntile-lab: {line}", file=sys.stderr, flush=True)
    out = cmd[len(cmd) - 1 - cmd[::-1].index("--out") + 1]
    return run_ranks(cmd, args.ranks, log_path=os.path.join(out, "mpirun.log"),
                     after_failure=(lambda: checkpoint_note(out)) if checkpoint_note else None)


# Open MPI lines that say nothing to a user of a run that went well: the plm's warning when
# the launch agent execs before mpirun's setpgid (scripts/cluster.sh's agent does)
_NOISE = ("plm:rsh: Warning: setpgid",)


def run_ranks(cmd: list[str], ranks, *, log_path: str | None = None,
              after_failure=None) -> int:
    """Run the launch line and pass its stderr through, except Open MPI's help blocks and log
    lines (``failures.Filter``), which go to ``log_path`` with the rest. If the ranks fail,
    end with one line: what happened, on which host (``failures.diagnose``), and
    ``after_failure()`` (where the last checkpoint is); what it cannot explain is shown as
    Open MPI printed it."""
    said = Filter()
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace") as proc:
        for text in proc.stderr:
            shown = said.feed(text)
            if shown:
                sys.stderr.write(shown)
                sys.stderr.flush()
        code = proc.wait()
    if log_path:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
            with open(log_path, "w") as f:
                f.write(said.all())
        except OSError:
            log_path = None
    held = "".join(ln for ln in said.held().splitlines(keepends=True)
                   if not any(n in ln for n in _NOISE))
    if not code:
        sys.stderr.write(held)
        return code
    btl = os.environ.get("OMPI_MCA_btl")  # noqa: SIM112 (Open MPI reads this spelling)
    failure = diagnose(said.all(), btl, ranks)
    if failure is None:
        sys.stderr.write(held)
        return code
    after = after_failure() if after_failure else ""
    if log_path:
        after += f"{' ' if after else ''}(Open MPI's messages: {log_path})"
    print(failure.line(ranks, after), file=sys.stderr, flush=True)
    return code


def rank() -> int:
    """This process's rank under mpirun or srun (0 outside)."""
    for name in RANK_ENV:
        if name in os.environ:
            return int(os.environ[name])
    return 0


def for_this_rank(args):
    """Under mpirun/srun: rank r > 0 writes into OUT/.rank<r> and prints nothing per step."""
    r = rank()
    if r > 0:
        args.out = os.path.join(args.out, f".rank{r}")
        args.no_progress, args.json, args.quiet_rank = True, False, True
    return args
