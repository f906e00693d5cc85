"""Replay a communication proxy with mpi4py on ``layout.world`` ranks.

Each rank runs its program: emulated compute sleeps for the modelled time, collectives and
point-to-point messages move real buffers (``count / scale`` floats). Per rank we report

    iteration_s  wall time of one iteration (median over ``iterations``)
    compute_s    emulated compute (the proxy's model)
    exposed_s    time spent blocked in MPI = communication not hidden behind compute
    comm_s       wall time of the same program with compute removed (all communication,
                 serialized by its own dependencies)
    bytes        payload bytes the rank hands to MPI per iteration (proxy sizes, unscaled)

``launch`` starts ``mpirun`` for the replay from a plain process (the CLI); under mpirun
``replay`` runs in place.
"""
from __future__ import annotations

import json
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
from nntile_lab.proxies.models import build
from nntile_lab.proxies.program import P2P, Collective, Compute, Proxy, Wait, event_bytes


def _buffers(prog: list, scale: int, group_size):
    """Largest send and receive buffers (floats) the program needs."""
    send = recv = 1
    for e in prog:
        if isinstance(e, Collective):
            n = max(1, e.count // scale)
            size = group_size(e.group)
            if e.op == "allgather":
                send, recv = max(send, n), max(recv, n * size)
            elif e.op == "reduce_scatter":
                send, recv = max(send, n * size), max(recv, n)
            elif e.op == "alltoall":
                n = max(size, n - n % size)
                send, recv = max(send, n), max(recv, n)
            else:
                send, recv = max(send, n), max(recv, n)
        elif isinstance(e, P2P):
            n = max(1, e.count // scale)
            send, recv = max(send, n), max(recv, n * max(1, len(e.recvs)))
    return send, recv


def replay(proxy: Proxy, *, iterations: int = 3, warmup: int = 1, scale: int = 1,
           memory_fraction: float = 0.25) -> dict | None:
    """Run ``proxy`` on MPI.COMM_WORLD; rank 0 returns the report, the others None."""
    from mpi4py import MPI  # optional (test extra); only ranks under mpirun need it

    world = MPI.COMM_WORLD
    lay = proxy.layout
    if world.size != lay.world:
        raise ValueError(f"the layout needs {lay.world} ranks, mpirun started {world.size}")
    if scale < 1 or iterations < 1 or warmup < 0:
        raise ValueError(f"scale={scale}, iterations={iterations}, warmup={warmup}: "
                         "scale and iterations must be >= 1, warmup >= 0")
    rank = world.rank
    comms = {"world": world}
    for g in ("tensor", "data", "pipeline"):
        color, key = lay.color(g, rank)
        comms[g] = world.Split(color, key)
    prog = proxy.program(rank)
    send_n, recv_n = _buffers(prog, scale, lay.size)
    need = (send_n + recv_n) * 4 * lay.world
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > memory_fraction * total:
        raise ValueError(f"replay buffers need {need / 2**30:.1f} GiB on this machine "
                         f"(> {memory_fraction:.0%} of RAM): pass --scale N to divide every "
                         f"message by N (try --scale {int(need / (memory_fraction * total)) + 1})")
    sbuf = np.ones(send_n, np.float32)
    rbuf = np.zeros(recv_n, np.float32)

    def run(with_compute: bool) -> tuple[float, float, float]:
        blocked = computed = 0.0
        pending = []
        world.Barrier()
        t0 = time.perf_counter()
        for e in prog:
            if isinstance(e, Compute):
                if with_compute and e.seconds > 0:
                    c0 = time.perf_counter()
                    time.sleep(e.seconds)
                    computed += time.perf_counter() - c0
                continue
            c0 = time.perf_counter()
            if isinstance(e, Collective):
                comm = comms[e.group]
                n, size = max(1, e.count // scale), comm.size
                if e.op == "allreduce":
                    args = (sbuf[:n], rbuf[:n], MPI.SUM)
                    call = comm.Iallreduce if not e.blocking else comm.Allreduce
                elif e.op == "allgather":
                    args = (sbuf[:n], rbuf[:n * size])
                    call = comm.Iallgather if not e.blocking else comm.Allgather
                elif e.op == "reduce_scatter":
                    args = (sbuf[:n * size], rbuf[:n], MPI.SUM)
                    call = (comm.Ireduce_scatter_block if not e.blocking
                            else comm.Reduce_scatter_block)
                else:  # alltoall: the rank's whole buffer, n/size to each peer
                    n = max(size, n - n % size)
                    args = (sbuf[:n], rbuf[:n])
                    call = comm.Ialltoall if not e.blocking else comm.Alltoall
                req = call(*args)
                if not e.blocking:
                    pending.append(req)
            elif isinstance(e, P2P):
                comm = comms[e.group]
                n = max(1, e.count // scale)
                reqs = [comm.Isend(sbuf[:n], dest=d, tag=e.tag) for d in e.sends]
                reqs += [comm.Irecv(rbuf[i * n:(i + 1) * n], source=s, tag=e.tag)
                         for i, s in enumerate(e.recvs)]
                MPI.Request.Waitall(reqs)
            elif isinstance(e, Wait):
                MPI.Request.Waitall(pending)
                pending = []
            blocked += time.perf_counter() - c0
        MPI.Request.Waitall(pending)
        return time.perf_counter() - t0, computed, blocked

    for _ in range(warmup):
        run(True)
    full = [run(True) for _ in range(iterations)]
    comm_only = [run(False)[0] for _ in range(iterations)]

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]
    mine = {"rank": rank, "host": socket.gethostname(), "iteration_s": median([f[0] for f in full]),
            "compute_s": median([f[1] for f in full]),
            "exposed_s": median([f[2] for f in full]), "comm_s": median(comm_only),
            "bytes": sum(event_bytes(e) for e in prog),
            "modelled_compute_s": sum(e.seconds for e in prog if isinstance(e, Compute))}
    rows = world.gather(mine, root=0)
    for g in ("tensor", "data", "pipeline"):
        comms[g].Free()
    if rank != 0:
        return None
    return {"proxy": proxy.to_dict(), "scale": scale, "iterations": iterations, "ranks": rows,
            "iteration_s": max(r["iteration_s"] for r in rows),
            "exposed_s": max(r["exposed_s"] for r in rows),
            "comm_s": max(r["comm_s"] for r in rows),
            "bytes_per_rank_max": max(r["bytes"] for r in rows),
            "hosts": len({r["host"] for r in rows})}


def report(res: dict) -> str:
    p = res["proxy"]
    lay = p["layout"]
    where = f" on {res['hosts']} host(s)" if res.get("hosts", 1) > 1 else ""
    lines = [f"{p['model']} {p['config']} replayed on {p['world']} rank(s){where} "
             f"(data={lay['data']} "
             f"tensor={lay['tensor']} pipeline={lay['pipeline']}), messages / {res['scale']}, "
             f"median of {res['iterations']}",
             f"  {'rank':>4} {'host':>10} {'iteration ms':>13} {'compute ms':>11} "
             f"{'exposed ms':>11} "
             f"{'comm ms':>9} {'MiB sent':>9}"]
    for r in res["ranks"]:
        lines.append(f"  {r['rank']:>4} {r.get('host', ''):>10} {r['iteration_s'] * 1e3:>13.2f} "
                     f"{r['compute_s'] * 1e3:>11.2f} {r['exposed_s'] * 1e3:>11.2f} "
                     f"{r['comm_s'] * 1e3:>9.2f} {r['bytes'] / 2**20:>9.1f}")
    return "\n".join(lines)


def launch(build_kwargs: dict, *, iterations: int = 3, warmup: int = 1, scale: int = 1,
           timeout: float = 600, hostfile: str | None = None) -> dict:
    """Start mpirun on the proxy's world size — local ranks, or one per host of ``hostfile``
    in turn — and return rank 0's report."""
    world = build(**build_kwargs).layout.world     # validates before starting MPI
    with tempfile.TemporaryDirectory(prefix="nntile_proxy_") as tmp:
        out = os.path.join(tmp, "result.json")
        job = json.dumps({"build": build_kwargs, "iterations": iterations, "warmup": warmup,
                          "scale": scale})
        cmd = mpirun_command(world, [sys.executable, "-m", "nntile_lab.cli", "_replay-rank",
                                     job, out],
                             hostfile=hostfile, map_by="node" if hostfile else None)
        try:
            # a Stop or kernel interrupt ends mpirun and its ranks (interrupts.py)
            proc = run_process(cmd, timeout=timeout, start_new_session=True, env=child_env(),
                               preexec_fn=launcher_preexec())   # ranks die with us
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"replay did not finish in {timeout:.0f} s: {' '.join(cmd)}"
                               ) from None
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"replay failed (exit {proc.returncode}): {why_failed(proc)}")
        with open(out) as f:
            return json.load(f)


def rank_main(job_json: str, out: str) -> int:
    """One rank of the replay (``nntile-lab _replay-rank JOB OUT`` under mpirun)."""
    job = json.loads(job_json)
    from mpi4py import MPI  # optional (test extra); only ranks under mpirun need it
    try:
        res = replay(build(**job["build"]), iterations=job["iterations"],
                     warmup=job["warmup"], scale=job["scale"])
    except Exception as exc:  # one rank's error must end every rank, never hang them
        print(f"rank {MPI.COMM_WORLD.rank}: {exc}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(3)
        return 3
    if res is not None:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f)
        os.replace(tmp, out)
    return 0

