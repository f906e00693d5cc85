"""The ``mpirun`` line: for training (``train --ranks N``), the StarPU-MPI tests and the
communication proxies' replay and collective benchmarks, on this machine or on hosts.

Where the ranks run: this machine (default), ``hosts`` (``"a:2,b:2"``, mpirun ``--host``) or a
``hostfile`` (Open MPI's format: ``host slots=N`` per line, ``#`` comments). A hostfile may also
carry the Open MPI settings its hosts need as comment lines ``# mca KEY VALUE`` (the launch
agent that reaches them, the network to use): they become ``--mca KEY VALUE`` on the line, so
the hostfile alone says how to reach its hosts (``scripts/cluster.sh`` writes such files).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from nntile_lab.errors import UsageError

# Open MPI over TCP only: the ob1 messaging layer with the TCP and self transports
TCP_MCA = (("pml", "ob1"), ("btl", "tcp,self"))


@dataclass(frozen=True)
class Hostfile:
    """An Open MPI hostfile, read: its hosts with their slots and its ``# mca`` settings."""
    path: str
    hosts: tuple = ()        # ((name, slots), ...)
    mca: tuple = ()          # ((key, value), ...)

    @property
    def slots(self) -> int:
        return sum(n for _, n in self.hosts)


def parse_hosts(text: str) -> list[tuple[str, int]]:
    """``"a:2,b"`` -> ``[("a", 2), ("b", 1)]``."""
    hosts = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, slots = part.partition(":")
        try:
            n = int(slots) if slots else 1
        except ValueError:
            n = 0
        if not name or n < 1:
            raise UsageError(f"--hosts {text!r}: give host[:slots] entries, e.g. node1:2,node2:2")
        hosts.append((name, n))
    if not hosts:
        raise UsageError(f"--hosts {text!r}: give at least one host, e.g. node1:2,node2:2")
    return hosts


def read_hostfile(path: str) -> Hostfile:
    """Read ``path`` (the value of ``--hostfile``); a missing, unreadable or empty file, or a
    directory, is a :class:`UsageError` naming it."""
    where = f"--hostfile {path!r}"
    if os.path.isdir(path):
        raise UsageError(f"{where} is a directory: give the hostfile inside it (lines "
                         "\"host slots=N\")")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file (give a file of lines \"host slots=N\")"
                         ) from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    hosts, mca = [], []
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if text.startswith("#"):
            words = text[1:].split(None, 2)
            if len(words) == 3 and words[0] == "mca":
                mca.append((words[1], words[2]))
            continue
        text = text.split("#", 1)[0].strip()
        if not text:
            continue
        name, *fields = text.split()
        slots = 1
        for field in fields:
            key, _, value = field.partition("=")
            if key in ("slots", "count", "cpu"):
                try:
                    slots = int(value)
                except ValueError:
                    slots = 0
                if slots < 1:
                    raise UsageError(f"{where}, line {number}: {field!r}: slots must be an "
                                     "integer >= 1 (e.g. \"node1 slots=2\")")
        hosts.append((name, slots))
    if not hosts:
        raise UsageError(f"{where} lists no host (only comments or blank lines): give one "
                         "line \"host slots=N\" per machine")
    return Hostfile(path, tuple(hosts), tuple(mca))


def mpirun_command(n: int, argv: list[str], *, extra_env: dict | None = None,
                   hosts: str | None = None, hostfile: str | Hostfile | None = None,
                   tcp: bool = False, map_by: str | None = None) -> list[str]:
    """The mpirun line for ``n`` ranks of ``argv`` (oversubscribed; as root allowed): on this
    machine, or on ``hosts`` / a ``hostfile`` (whose ``# mca`` lines are added); ``tcp`` makes
    Open MPI use TCP between every pair of ranks (no shared memory, no InfiniBand);
    ``map_by="node"`` places rank i on host i mod hosts (one rank per host first)."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError("mpirun not found: install Open MPI (apt-get install openmpi-bin "
                           "libopenmpi-dev, or scripts/setup.sh test)")
    cmd = [mpirun, "-n", str(n), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if hosts:
        cmd += ["--host", ",".join(f"{h}:{k}" for h, k in parse_hosts(hosts))]
    mca: dict = {}
    if hostfile is not None:
        hf = hostfile if isinstance(hostfile, Hostfile) else read_hostfile(hostfile)
        cmd += ["--hostfile", hf.path]
        mca.update(hf.mca)
    if tcp:
        for key, value in TCP_MCA:
            mca.setdefault(key, value)
    for key, value in mca.items():
        cmd += ["--mca", key, value]
    if map_by:
        cmd += ["--map-by", map_by]
    for k, v in (extra_env or {}).items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + list(argv)


def under_mpirun() -> bool:
    return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ
