#!/usr/bin/env python3
"""The α-β extrapolation against measurement on namespace hosts (issue 31; needs root).

For each link setting (``--gbit``): bring up a cluster (scripts/cluster.sh), measure p2p and
allreduce on 2 hosts and fit α-β per operation (nntile_lab.proxies.validate.fitted_link), then
on each host count (``--hosts``) measure and predict

- the GPT-2 proxy's iteration (``proxy gpt2 --data N --hostfile``, messages / ``--scale``);
- the StarPU-MPI training step (``train --layout data --hostfile``), predicted from the fit,
  the bytes per host that N local ranks' StarPU-MPI counted (``comm.csv``) and the single
  process's step time;

and on 4 hosts each of dnn-distributed's four models (GPT-2 data-parallel, GPT-3 tensor ×
pipeline, CosmoFlow 2×2 spatial shards, DLRM embeddings all-to-all): measured beside predicted.

Writes OUT/results.json (every measurement, the fits, load, CPU, date), OUT/extrapolation.png
and prints the table for BENCHMARKS.md. Quote its numbers only from a quiet machine:

    flock /work/bench.lock .venv/bin/python scripts/cluster_bench.py --out runs/cluster_bench

Why these sizes: 2 cores run up to 8 ranks here, so the link must dominate the step — slow
links (0.1 and 0.5 Gbit/s by default; 10 Gbit/s veth traffic would be CPU-bound on 2 cores) and
a model whose step moves megabytes per host for milliseconds of compute (README of the results:
docs/distributed.md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from nntile_lab.engine import facts  # noqa: E402
from nntile_lab.proxies import collectives, replay, validate  # noqa: E402
from nntile_lab.proxies.extrapolate import simulate  # noqa: E402
from nntile_lab.proxies.models import build  # noqa: E402

CLUSTER = REPO / "scripts" / "cluster.sh"
# the StarPU-MPI step: 2 layers, n_embd 256 in whole-width tiles, 4 sequences of 32 tokens
# (one per rank up to 4): ~2 M parameters, megabytes per step between hosts, ~1 GFLOP
# dnn-distributed's four models on 4 hosts (one rank each)
FOUR = {"GPT-2 small, data 4": {"model": "gpt2", "config_name": "small", "data": 4,
                                "bucket": "layer"},
        "GPT-3 small, tensor 2 x pipeline 2": {"model": "gpt3", "config_name": "small",
                                               "tensor": 2, "pipeline": 2, "seq_len": 1024},
        "CosmoFlow, 2x2 spatial shards": {"model": "cosmoflow", "tensor": 4},
        "DLRM, data 4": {"model": "dlrm", "data": 4}}
TRAIN = ["--n-layer", "2", "--n-head", "4", "--n-embd", "256", "--vocab-size", "64",
         "--seq-len", "32", "--batch", "8", "--batch-tile", "1", "--embd-tile", "256",
         "--inner-tile", "1024", "--vocab-tile", "64", "--eval-every", "0",
         "--checkpoint-every", "0", "--no-progress", "--scheduler", "eager"]


def sh(*cmd, timeout=1800, cwd=None, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr[-3000:]}")
    return proc


def nntile_lab(*args, cwd) -> subprocess.CompletedProcess:
    return sh(sys.executable, "-m", "nntile_lab.cli", *args, cwd=cwd,
              env={**os.environ, "PYTHONPATH": str(REPO), "STARPU_SILENT": "1"})


# The fit and the replay use one allreduce algorithm, the one the model's formula describes:
# Open MPI's ring, blocking (coll tuned) and non-blocking (libnbc: the proxy's gradient
# all-reduces); left to itself Open MPI picks by size and rank count, differently in each.
RING = ["# mca coll_tuned_use_dynamic_rules 1", "# mca coll_tuned_allreduce_algorithm 4",
        "# mca coll_libnbc_iallreduce_algorithm 1"]


def hostfile(full: str, hosts: int, out: Path) -> str:
    """A copy of the cluster's hostfile naming its first ``hosts`` hosts (allreduce: ring)."""
    lines = Path(full).read_text().splitlines()
    keep = [ln for ln in lines if ln.startswith("#")] + RING
    names = [ln for ln in lines if ln and not ln.startswith("#")][:hosts]
    path = out / f"hostfile{hosts}"
    path.write_text("\n".join(keep + names) + "\n")
    return str(path)


def bridge_capacity(work: Path) -> float:
    """Bytes per second the machine moves between two namespace hosts with unshaped links:
    the p2p fit's bandwidth (large messages) on a 2-host cluster at 1000 Gbit/s."""
    name = "cbx"
    subprocess.run(["bash", str(CLUSTER), "down", "--name", name], capture_output=True)
    up = sh("bash", CLUSTER, "up", 2, "--gbit", 1000, "--name", name, "--owner", os.getpid())
    try:
        full = re.search(r"hostfile: (\S+)", up.stdout).group(1)
        rows = collectives.run(2, ("p2p",), collectives.default_sizes(2**20, 64 * 2**20),
                               hostfile=hostfile(full, 2, work))
    finally:
        subprocess.run(["bash", str(CLUSTER), "down", "--name", name], capture_output=True)
    return 1.0 / collectives.fit(rows)["p2p"]["beta"]


def volume_difference(a: dict, b: dict) -> float:
    """Largest relative difference of two runs' bytes per rank and direction (a few bytes of
    scalars land in the step before or after, as the marks are taken asynchronously)."""
    if set(a) != set(b):
        return float("inf")
    return max(abs(x - y) / max(x, y, 1.0) for k in a for x, y in zip(a[k], b[k]))


def train_step(work: Path, name: str, steps: int, *extra) -> tuple[float, Path]:
    out = work / name
    if out.exists():
        shutil.rmtree(out)
    nntile_lab("train", "--data", work / "data", *TRAIN, "--steps", steps, "--out", out, *extra,
               cwd=work)
    return validate.step_time(out / "log.csv"), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="2,4,8", help="host counts (default 2,4,8)")
    ap.add_argument("--gbit", default="0.1,0.5", help="link settings in Gbit/s")
    ap.add_argument("--proxy-config", default="small", help="GPT-2 proxy config (default small)")
    ap.add_argument("--scale", type=int, default=16, help="proxy messages / N (default 16)")
    ap.add_argument("--tflops", type=float, default=100.0, help="proxy's emulated compute rate")
    ap.add_argument("--steps", type=int, default=6, help="StarPU-MPI training steps timed")
    ap.add_argument("--max-bytes", type=int, default=16 * 2**20, help="collectives' largest")
    ap.add_argument("--out", default="runs/cluster_bench")
    ap.add_argument("--skip", default="",
                    help="comma list of: proxy, starpu, four, capacity")
    args = ap.parse_args()
    hosts = [int(h) for h in args.hosts.split(",")]
    gbits = [float(g) for g in args.gbit.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cluster_bench_"))
    from tests.torch_adapter import tiny_dataset
    tiny_dataset(work / "data")
    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
               "machine": facts.machine(), "command": " ".join(sys.argv),
               "hosts": hosts, "proxy": {"model": "gpt2", "config": args.proxy_config,
                                         "scale": args.scale, "tflops": args.tflops,
                                         "bucket": "layer"},
               "train": TRAIN, "cores": os.cpu_count(), "settings": []}
    starpu = "starpu" not in skip
    if starpu:
        # the layout's bytes per host on N ranks (any transport counts the same) and the
        # single process's compute: both known without the cluster
        t1, _ = train_step(work, "one", args.steps, "--ncpu", "1")
        results["single_step_s"] = t1
        volumes = {}
        for n in hosts:
            _, run = train_step(work, f"local{n}", 3, "--ranks", n, "--layout", "data")
            volumes[n] = validate.link_loads(pd.read_csv(run / "comm.csv"), by="rank")
        results["volumes"] = volumes
    if "capacity" not in skip:
        # what the bridge (the CPUs running every host's TCP stack) moves with the links
        # unshaped: p2p on 2 hosts, large messages
        results["capacity"] = bridge_capacity(work)
    for g in gbits:
        name = "cb"
        subprocess.run(["bash", str(CLUSTER), "down", "--name", name], capture_output=True)
        up = sh("bash", CLUSTER, "up", max(hosts), "--gbit", g, "--name", name, "--owner",
                os.getpid())
        full = re.search(r"hostfile: (\S+)", up.stdout).group(1)
        setting = {"name": f"{g:g} Gbit/s", "gbit": g, "load_before": os.getloadavg(),
                   "points": []}
        try:
            rows = collectives.run(2, collectives.OPS,
                                   collectives.default_sizes(1024, args.max_bytes),
                                   hostfile=hostfile(full, 2, work))
            link = validate.fitted_link(setting["name"], rows,
                                        capacity_bytes_s=results.get("capacity"))
            per_op = validate.fitted_link(setting["name"], rows, per_op=True,
                                          capacity_bytes_s=results.get("capacity"))
            setting["collectives"], setting["fit"] = rows, link.model
            for n in hosts:
                hf = hostfile(full, n, work)
                if "proxy" not in skip:
                    kw = {"model": "gpt2", "config_name": args.proxy_config, "data": n,
                          "bucket": "layer", "tflops": args.tflops}
                    res = replay.launch(kw, iterations=3, scale=args.scale, hostfile=hf)
                    pred = simulate(build(**kw), link, scale=args.scale)
                    setting["points"].append({
                        "what": f"GPT-2 proxy ({args.proxy_config}, /{args.scale})",
                        "hosts": n, "measured_s": res["iteration_s"],
                        "predicted_s": pred["iteration_s"], "detail": pred,
                        "predicted_per_op_s": simulate(build(**kw), per_op,
                                                       scale=args.scale)["iteration_s"],
                        "replay_hosts": res["hosts"]})
                if starpu:
                    t, run = train_step(work, f"g{g}n{n}", args.steps, "--hostfile", hf,
                                        "--layout", "data")
                    pred = validate.predict_step(volumes[n], link, results["single_step_s"],
                                                 n, os.cpu_count())
                    measured_loads = validate.link_loads(pd.read_csv(run / "comm.csv"),
                                                         by="rank")
                    setting["points"].append({
                        "what": "StarPU-MPI step (data layout)", "hosts": n,
                        "measured_s": t, "predicted_s": pred["step_s"], "detail": pred,
                        "volume_vs_local": volume_difference(measured_loads, volumes[n])})
                print(f"{setting['name']}: {n} hosts done", file=sys.stderr, flush=True)
            if "four" not in skip and 4 in hosts:
                setting["four"] = []
                for what, kw in FOUR.items():
                    kw = dict(kw, tflops=args.tflops)
                    res = replay.launch(kw, iterations=3, scale=args.scale,
                                        hostfile=hostfile(full, 4, work))
                    pred = simulate(build(**kw), link, scale=args.scale)
                    setting["four"].append({"what": what, "hosts": 4,
                                            "measured_s": res["iteration_s"],
                                            "predicted_s": pred["iteration_s"],
                                            "comm_measured_s": res["comm_s"],
                                            "comm_predicted_s": pred["comm_s"]})
        finally:
            subprocess.run(["bash", str(CLUSTER), "down", "--name", name], capture_output=True)
        setting["load_after"] = os.getloadavg()
        results["settings"].append(setting)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)
    validate.plot(results, str(out / "extrapolation.png"))
    print(validate.table(results))
    print(f"\nwrote {out / 'results.json'} and {out / 'extrapolation.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
