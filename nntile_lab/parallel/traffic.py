"""What a training run on several ranks sent over the network, per rank pair and host pair.

StarPU-MPI counts the payload bytes each rank hands to MPI for each other rank
(``MPIContext.bytes_sent``, cumulative). :class:`Traffic` takes a snapshot at marks in the run
(after each step's forward/backward/update, after its evaluation and checkpoint), and at the
end gathers every rank's snapshots and host name on rank 0, which writes ``comm.csv``: one
row per (mark, source rank, destination rank) with the host names and the bytes sent in the
interval that ends at the mark. Ranks on the same host talk over that host's loopback; the
bytes between different hosts are those that crossed a link.
"""
from __future__ import annotations

import socket

import numpy as np
import pandas as pd

HOST_BYTES = 64            # a host name travels as 8 int64 (truncated to 64 bytes)
COLUMNS = ("step", "phase", "src_rank", "dst_rank", "src_host", "dst_host", "bytes")


def _encode(name: str) -> list[int]:
    raw = name.encode()[:HOST_BYTES].ljust(HOST_BYTES, b"\0")
    return np.frombuffer(raw, dtype=np.int64).tolist()


def _decode(words) -> str:
    return np.asarray(words, dtype=np.int64).tobytes().rstrip(b"\0").decode(errors="replace")


class Traffic:
    """Snapshots of ``mpi.bytes_sent()`` at marks; :meth:`gather` builds the table."""

    def __init__(self, mpi):
        self.mpi = mpi
        self.marks: list[tuple[int, str]] = []
        self.counts: list[list[int]] = [mpi.bytes_sent()]   # the start

    def mark(self, step: int, phase: str) -> None:
        """The bytes sent since the previous mark belong to ``(step, phase)``."""
        self.marks.append((step, phase))
        self.counts.append(self.mpi.bytes_sent())

    def gather(self) -> pd.DataFrame | None:
        """Every rank's intervals on rank 0 as a frame of :data:`COLUMNS` (None elsewhere);
        every rank calls it at the same point."""
        size = self.mpi.size
        counts = np.asarray(self.counts, dtype=np.int64)          # (marks + 1, size)
        row = [*_encode(socket.gethostname()), *np.diff(counts, axis=0).ravel().tolist()]
        rows = self.mpi.gather_rows(row)
        if rows is None:
            return None
        words = HOST_BYTES // 8
        hosts = [_decode(r[:words]) for r in rows]
        out = []
        for src, r in enumerate(rows):
            sent = np.asarray(r[words:], dtype=np.int64).reshape(len(self.marks), size)
            for (step, phase), per_dst in zip(self.marks, sent):
                for dst in range(size):
                    if dst != src:
                        out.append((step, phase, src, dst, hosts[src], hosts[dst],
                                    int(per_dst[dst])))
        return pd.DataFrame(out, columns=list(COLUMNS))


def by_host_pair(frame: pd.DataFrame, phase: str | None = "train") -> pd.DataFrame:
    """Bytes per (source host, destination host) over different hosts: the total and the
    median per step (of ``phase``'s intervals; None: all)."""
    df = frame[frame["src_host"] != frame["dst_host"]]
    if phase is not None:
        df = df[df["phase"] == phase]
    per_step = df.groupby(["src_host", "dst_host", "step"], as_index=False)["bytes"].sum()
    return (per_step.groupby(["src_host", "dst_host"])["bytes"]
            .agg(total="sum", per_step="median").reset_index())


def report(frame: pd.DataFrame) -> str:
    """One line: the bytes per step between hosts, pair by pair."""
    pairs = by_host_pair(frame)
    if pairs.empty:
        return "network: nothing crossed between hosts (every rank on one host)"
    parts = [f"{r.src_host}->{r.dst_host} {r.per_step / 2**20:.2f}" for r in pairs.itertuples()]
    return "network, MiB per training step between hosts: " + ", ".join(parts)
