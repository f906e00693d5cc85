"""Collective benchmarks under mpirun and their α-β (latency-bandwidth) model.

Cost of one operation on ``P`` ranks for ``n`` bytes (ring / pairwise algorithms; ``n`` means
what the proxy's ``count`` means: the allreduce buffer, a rank's allgather contribution, what a
rank keeps of a reduce-scatter, a rank's whole all-to-all buffer, one p2p message)::

    p2p             α + n·β
    allreduce       2(P−1)·α + 2(P−1)/P · n·β
    allgather       (P−1)·α + (P−1) · n·β
    reduce_scatter  (P−1)·α + (P−1) · n·β
    alltoall        (P−1)·α + (P−1)/P · n·β

``fit`` finds α and β per operation from measured (n, t) points by least squares on the
relative error (each row divided by its t, so 8 B and 64 MiB weigh alike);
``relative_errors`` gives the relative error on the fitted points and on held-out sizes.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from nntile_lab.interrupts import run_process
from nntile_lab.orphans import child_env, launcher_preexec
from nntile_lab.parallel.failures import why_failed
from nntile_lab.parallel.mpirun import mpirun_command

OPS = ("p2p", "allreduce", "allgather", "reduce_scatter", "alltoall")
MiB = 2 ** 20


def default_sizes(min_bytes: int = 8, max_bytes: int = 64 * MiB) -> list[int]:
    """Powers of two from ``min_bytes`` to ``max_bytes`` (multiples of 4: fp32 buffers)."""
    if min_bytes < 4 or max_bytes < min_bytes:
        raise ValueError(f"sizes {min_bytes}..{max_bytes} bytes: need 4 <= min <= max")
    out, n = [], 1 << max(2, math.ceil(math.log2(min_bytes)))
    while n <= max_bytes:
        out.append(n)
        n *= 2
    return out


def coefficients(op: str, ranks: int) -> tuple[float, float]:
    """(a, b) with cost = a·α + b·n·β for ``op`` on ``ranks`` ranks."""
    p = ranks
    if op == "p2p":
        return 1.0, 1.0
    if p <= 1:
        return 0.0, 0.0
    return {"allreduce": (2 * (p - 1), 2 * (p - 1) / p),
            "allgather": (p - 1, p - 1), "reduce_scatter": (p - 1, p - 1),
            "alltoall": (p - 1, (p - 1) / p)}[op]


def cost(op: str, nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    a, b = coefficients(op, ranks)
    return a * alpha + b * nbytes * beta


# ---------------------------------------------------------------- measuring (under mpirun)
def measure(ops=OPS, sizes=None, *, min_time: float = 0.02, min_repeats: int = 5,
            max_repeats: int = 50) -> list:
    """Time each op and size on MPI.COMM_WORLD; rank 0 gets the rows.

    The time is the minimum over repeats (at least ``min_repeats``, until ``min_time``): on a
    shared, oversubscribed machine a preempted rank adds tens of ms to single repeats, which
    a median of few repeats does not filter out."""
    from mpi4py import MPI  # optional (test extra); only ranks under mpirun need it

    comm = MPI.COMM_WORLD
    p, rank = comm.size, comm.rank
    sizes = sizes or default_sizes()
    for op in ops:
        if op not in OPS:
            raise ValueError(f"op {op!r}: choose from {', '.join(OPS)}")
    if "p2p" in ops and p < 2:
        raise ValueError("p2p needs at least 2 ranks")
    hosts = len(set(comm.allgather(socket.gethostname())))
    big = max(sizes) // 4 * max(p, 1)
    sbuf = np.ones(big, np.float32)
    rbuf = np.zeros(big, np.float32)
    rows = []
    for op in ops:
        for nbytes in sizes:
            n = max(1, nbytes // 4)
            if op == "alltoall":
                n = max(p, n - n % p)

            _once(comm, op, n, sbuf, rbuf)  # warm-up (connections, registration)
            times = []
            while True:
                comm.Barrier()
                t0 = time.perf_counter()
                _once(comm, op, n, sbuf, rbuf)
                dt = time.perf_counter() - t0
                # every rank takes the slowest rank's time, and agrees on when to stop
                dt = comm.allreduce(dt, op=MPI.MAX)
                times.append(dt / 2 if op == "p2p" else dt)
                if len(times) >= max_repeats or (len(times) >= min_repeats
                                                 and sum(times) > min_time):
                    break
            times.sort()
            rows.append({"op": op, "bytes": n * 4, "ranks": p, "hosts": hosts,
                         "time_s": times[0],
                         "median_s": times[len(times) // 2], "repeats": len(times)})
    return rows if rank == 0 else None


def _once(comm, op: str, n: int, sbuf, rbuf) -> None:
    """One ``op`` of ``n`` floats per rank on ``comm`` (an mpi4py communicator)."""
    from mpi4py import MPI  # optional (test extra); only ranks under mpirun need it

    p, rank = comm.size, comm.rank
    if op == "p2p":   # ping-pong between ranks 0 and 1: half the round trip
        if rank == 0:
            comm.Send(sbuf[:n], dest=1)
            comm.Recv(rbuf[:n], source=1)
        elif rank == 1:
            comm.Recv(rbuf[:n], source=0)
            comm.Send(sbuf[:n], dest=0)
    elif op == "allreduce":
        comm.Allreduce(sbuf[:n], rbuf[:n], MPI.SUM)
    elif op == "allgather":
        comm.Allgather(sbuf[:n], rbuf[:n * p])
    elif op == "reduce_scatter":
        comm.Reduce_scatter_block(sbuf[:n * p], rbuf[:n], MPI.SUM)
    else:
        comm.Alltoall(sbuf[:n], rbuf[:n])


def run(ranks: int, ops=OPS, sizes=None, *, timeout: float = 600,
        hostfile: str | None = None) -> list:
    """Start mpirun with ``ranks`` ranks — local, or one per host of ``hostfile`` in turn —
    and return the measured rows."""
    sizes = sizes or default_sizes()
    with tempfile.TemporaryDirectory(prefix="nntile_coll_") as tmp:
        out = os.path.join(tmp, "rows.json")
        job = json.dumps({"ops": list(ops), "sizes": list(sizes)})
        cmd = mpirun_command(ranks, [sys.executable, "-m", "nntile_lab.cli",
                                     "_collectives-rank", job, out],
                             hostfile=hostfile, map_by="node" if hostfile else None)
        try:
            # a Stop or kernel interrupt ends mpirun and its ranks (interrupts.py)
            proc = run_process(cmd, timeout=timeout, start_new_session=True, env=child_env(),
                               preexec_fn=launcher_preexec())   # ranks die with us
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"collective benchmark did not finish in {timeout:.0f} s") from None
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"collective benchmark failed (exit {proc.returncode}): "
                               f"{why_failed(proc)}")
        with open(out) as f:
            return json.load(f)


# ---------------------------------------------------------------- the model
def spikes(rows: list, factor: float = 4.0) -> list:
    """Points more than ``factor``× slower than both neighbouring sizes of the same op: a rank
    preempted on a shared machine, not the link (a cost that grows with size is kept)."""
    out = []
    for op in sorted({r["op"] for r in rows}):
        pts = sorted((r for r in rows if r["op"] == op), key=lambda r: r["bytes"])
        for i, r in enumerate(pts):
            near = [pts[j]["time_s"] for j in (i - 1, i + 1) if 0 <= j < len(pts)]
            if near and r["time_s"] > factor * max(near):
                out.append(r)
    return out


def fit(rows: list) -> dict:
    """{op: {"alpha": s, "beta": s/byte, "ranks": P}} by relative least squares per op,
    without the :func:`spikes` (they stay in :func:`relative_errors`)."""
    out = {}
    bad = {id(r) for r in spikes(rows)}
    for op in sorted({r["op"] for r in rows}):
        pts = [r for r in rows if r["op"] == op and id(r) not in bad]
        p = pts[0]["ranks"]
        a, b = coefficients(op, p)
        if a == 0:
            raise ValueError(f"{op} on {p} rank: nothing to fit (run with 2 or more ranks)")
        t = np.array([r["time_s"] for r in pts])
        m = np.array([[a, b * r["bytes"]] for r in pts]) / t[:, None]
        (alpha, beta), *_ = np.linalg.lstsq(m, np.ones(len(pts)), rcond=None)
        if alpha < 0 or beta < 0:   # a negative term: refit the other alone (non-negative LS)
            cols = [0] if beta < 0 else [1]
            (only,), *_ = np.linalg.lstsq(m[:, cols], np.ones(len(pts)), rcond=None)
            alpha, beta = (max(only, 0.0), 0.0) if beta < 0 else (0.0, max(only, 0.0))
        out[op] = {"alpha": float(alpha), "beta": float(beta), "ranks": p,
                   "bandwidth_gbs": (1 / beta / 1e9) if beta > 0 else math.inf}
    return out


def predict(model: dict, op: str, nbytes: float, ranks: int | None = None) -> float:
    m = model[op]
    return cost(op, nbytes, ranks or m["ranks"], m["alpha"], m["beta"])


def relative_errors(model: dict, rows: list) -> dict:
    """Per op: median and max |predicted − measured| / measured over ``rows``."""
    out = {}
    for op in model:
        errs = sorted(abs(predict(model, op, r["bytes"], r["ranks"]) - r["time_s"]) / r["time_s"]
                      for r in rows if r["op"] == op)
        if errs:
            out[op] = {"median": errs[len(errs) // 2], "max": errs[-1], "points": len(errs)}
    return out


def split(rows: list) -> tuple[list, list]:
    """Every other size of each op for fitting, the ones between held out."""
    fit_rows, held = [], []
    for op in sorted({r["op"] for r in rows}):
        pts = sorted((r for r in rows if r["op"] == op), key=lambda r: r["bytes"])
        fit_rows += pts[::2]
        held += pts[1::2]
    return fit_rows, held


def fit_and_check(rows: list) -> dict:
    fit_rows, held = split(rows)
    model = fit(fit_rows)
    return {"model": model, "fitted": relative_errors(model, fit_rows),
            "held_out": relative_errors(model, held), "rows": rows}


def report(res: dict) -> str:
    lines = [f"{'op':<15} {'ranks':>5} {'alpha us':>9} {'GB/s':>8} {'fit err med/max':>17} "
             f"{'held-out med/max':>17}"]
    for op, m in res["model"].items():
        f, h = res["fitted"].get(op, {}), res["held_out"].get(op, {})
        lines.append(f"{op:<15} {m['ranks']:>5} {m['alpha'] * 1e6:>9.2f} "
                     f"{m['bandwidth_gbs']:>8.2f} "
                     f"{f.get('median', 0):>8.0%}/{f.get('max', 0):<8.0%}"
                     f" {h.get('median', 0):>8.0%}/{h.get('max', 0):<8.0%}")
    return "\n".join(lines)


def plot(res: dict, path: str) -> str:
    """Measured points (fitted: filled, held out: hollow) and the model's lines, log-log."""
    # heavy: only a plot loads pyplot (the ranks and the CLI's text never do); the backend
    # stays the process's (the CLI picks Agg; a notebook keeps its own)
    import matplotlib.pyplot as plt
    fit_rows, held = split(res["rows"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, op in enumerate(res["model"]):
        c = f"C{i}"
        xs = sorted({r["bytes"] for r in res["rows"] if r["op"] == op})
        ax.plot(xs, [predict(res["model"], op, x) for x in xs], color=c, lw=1, label=op)
        for rows, face in ((fit_rows, c), (held, "none")):
            pts = [r for r in rows if r["op"] == op]
            ax.scatter([r["bytes"] for r in pts], [r["time_s"] for r in pts], s=14,
                       facecolors=face, edgecolors=c)
    ax.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="time (s)",
           title="collectives: measured (filled: fitted, hollow: held out) and α-β model")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def save_figure(fig, path: str):
    """Atomic write of a figure (the format from the file name)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=os.path.splitext(path)[1])
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def rank_main(job_json: str, out: str) -> int:
    """One rank of the benchmark (``nntile-lab _collectives-rank JOB OUT`` under mpirun)."""
    job = json.loads(job_json)
    from mpi4py import MPI  # optional (test extra); only ranks under mpirun need it
    try:
        rows = measure(job["ops"], job["sizes"])
    except Exception as exc:
        print(f"rank {MPI.COMM_WORLD.rank}: {exc}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(3)
        return 3
    if rows is not None:
        with open(out + ".tmp", "w") as f:
            json.dump(rows, f)
        os.replace(out + ".tmp", out)
    return 0

