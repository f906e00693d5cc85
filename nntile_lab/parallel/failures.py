"""Why a multi-rank run ended: one line from what Open MPI printed.

When a host's link goes down, a host's ranks are killed or the ranks cannot reach each other,
Open MPI prints "help messages" — blocks between lines of dashes, each tens of lines, several
per failure (one per rank that noticed) — and log lines ``[host:pid] ...``. The launcher
(``launch.run_ranks``) keeps them out of the terminal, writes all of mpirun's output to a log
file, and ends with the one line :func:`diagnose` builds: which host, what happened, what to do.
What it cannot explain it lets through unchanged.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# A help block's bar: 74 dashes. Ranks' output reaches mpirun in chunks that may end inside a
# line, so a bar can arrive glued to the end of a rank's half line: a bar anywhere counts.
DASHES = re.compile(r"-{40,}")
# Open MPI's own log lines: "[vm:04225] ..." (aggregated help counts, ORTE_ERROR_LOG, the
# plm's setpgid warning) and the transports' "[host][[job,vpid],rank][file:line:func] ..."
# (BTL_ERROR writes its prefix, its message and its newline separately, so its pieces can
# arrive apart: the messages a failing TCP connection prints are recognised alone too)
OMPI_LOG = re.compile(r"^\[[\w.-]+:\d+\] |\[[\w.-]+\]\[\[\d+,\d+\],\d+\]\[")
BTL_PIECES = re.compile(r"^\s*(invalid connection state|mca_btl_tcp_\w+: |[\w ]*(readv|writev|"
                        r"recv|send|connect\(\)[^:]*) failed)")
BLOCK_MAX = 80     # lines: a block this long without its closing bar was not one


@dataclass(frozen=True)
class Failure:
    host: str | None     # the host at fault, where Open MPI names it
    cause: str           # what happened, in a sentence fragment
    started: bool = True  # False: the ranks never ran (nothing to stop)

    def line(self, ranks=None, after: str = "") -> str:
        who = f"all {ranks} ranks" if ranks else "every rank"
        text = f"{self.cause}; {who} stopped." if self.started else f"{self.cause}."
        return f"nntile-lab: {text}{(' ' + after) if after else ''}"


# (pattern, cause) in order of precedence: the first failure that explains the others (a lost
# host's ranks are killed with it; a killed rank makes its peers print "peer hung up")
_CAUSES = [
    (re.compile(r"lost communication with a remote daemon\..*?Remote daemon:\s*\S+ on node "
                r"(\S+)", re.S),
     lambda m: Failure(m[1], f"lost the connection to host {m[1]}: its network link is down "
                             "or the host stopped answering (Open MPI's daemon there missed "
                             "its keepalives)")),
    (re.compile(r"mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on "
                r"signal (\d+) \(([^)]*)\)"),
     lambda m: Failure(m[2], f"rank {m[1]} on host {m[2]} was killed by signal {m[3]} "
                             f"({m[4]})")),
    (re.compile(r"nntile_lab: rank (\d+) on host (\S+) failed"),
     lambda m: Failure(m[2], f"rank {m[1]} on host {m[2]} failed (its error is above)")),
    (re.compile(r"unable to complete a TCP connection\s+to another process:\s+Local host:\s+"
                r"(\S+)\s+Remote host:\s+(\S+)", re.S),
     lambda m: Failure(m[1], f"host {m[1]} could not open a TCP connection to {m[2]} (its "
                             "link is down, or a firewall or a missing route is in the way)")),
    (re.compile(r"ORTE was unable to reliably start one or more daemons.*?(?:node|host)[:\s]+"
                r"(\S+)?", re.S),
     lambda m: Failure(m[1], "Open MPI could not start its daemon on "
                             + (f"host {m[1]}" if m[1] else "a host")
                             + " (the launch agent failed: is the host up and reachable?)")),
    (re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on non-zero status "
                r"(\d+)"),
     lambda m: Failure(m[2], f"rank {m[1]} on host {m[2]} exited with status {m[3]}")),
    (re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)"),
     lambda m: Failure(None, f"rank {m[1]} exited with status {m[2]}")),
]
# MPI_Init failed: the help text names MPI_Init or the unreachable pair; when that text
# itself is lost, only show_help's unpack errors remain
_INIT_FAILED = ("mpi_init", "unable to reach each other", "show_help.c")


def diagnose(text: str, btl: str | None = None, ranks=None) -> Failure | None:
    """The failure ``text`` (mpirun's stderr) shows, or None if it shows none we know."""
    for pattern, make in _CAUSES:
        m = pattern.search(text)
        if m:
            return make(m)
    if any(mark in text.lower() for mark in _INIT_FAILED):
        allowed = f"OMPI_MCA_btl={btl}" if btl else "the transports Open MPI found"
        return Failure(None, f"MPI could not start the {ranks or ''} ranks (MPI_Init failed): "
                             f"they are unable to reach each other with {allowed}. Fix: let "
                             "them use a transport they share (--tcp for TCP between every "
                             "pair; unset OMPI_MCA_btl / OMPI_MCA_pml), or check that every "
                             "host can open connections to the others", started=False)
    return None


class Filter:
    """Feed mpirun's stderr line by line: :meth:`feed` returns what the terminal should show
    now (Open MPI's help blocks and log lines held back); :meth:`held` is what was held."""

    def __init__(self):
        self.text: list[str] = []     # everything, for the log and the diagnosis
        self._held: list[str] = []
        self._in_block = False
        self._block_lines = 0

    def feed(self, line: str) -> str:
        self.text.append(line)
        if DASHES.search(line):
            self._in_block = not self._in_block
            self._block_lines = 0
            self._held.append(line)
            return ""
        if self._in_block:
            self._block_lines += 1
            if self._block_lines > BLOCK_MAX:   # a stray bar: stop holding everything
                self._in_block = False
        if self._in_block or OMPI_LOG.search(line) or BTL_PIECES.match(line):
            self._held.append(line)
            return ""
        return line

    def all(self) -> str:
        return "".join(self.text)

    def held(self) -> str:
        return "".join(self._held)


def why_failed(proc) -> str:
    """For a finished mpirun (``subprocess.CompletedProcess``): what the ranks themselves said
    (their lines, without Open MPI's blocks and log lines), else the cause Open MPI's output
    shows, else the end of that output."""
    said = Filter()
    own = "".join(said.feed(ln) for ln in (proc.stderr or "").splitlines(keepends=True))
    if own.strip():
        return own.strip()[-2000:]
    failure = diagnose(proc.stderr or "")
    return failure.cause if failure else (proc.stderr or proc.stdout or "")[-2000:]
