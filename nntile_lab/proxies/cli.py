"""``nntile-lab proxy {gpt2,gpt3,cosmoflow,dlrm}``: derive, replay or extrapolate a proxy's
messages; ``nntile-lab collectives``: benchmark MPI collectives and fit the α-β model."""
from __future__ import annotations

import argparse
import json

from nntile_lab.errors import UsageError
from nntile_lab.options import float_range, int_range
from nntile_lab.orphans import die_with_launcher
from nntile_lab.parallel.mpirun import read_hostfile
from nntile_lab.proxies import collectives as coll
from nntile_lab.proxies import extrapolate as ex
from nntile_lab.proxies import models, replay


def register_cli(subparsers):
    p = subparsers.add_parser(
        "proxy", help="communication of one training iteration of GPT-2/GPT-3/CosmoFlow/DLRM",
        description=__doc__ + " Without --dry-run the proxy is replayed with mpi4py under "
        "mpirun on data·tensor·pipeline local ranks.")
    p.add_argument("model", choices=models.MODELS)
    names = sorted({n for c in models.CONFIGS.values() for n in c})
    p.add_argument("--config", default=None, metavar="NAME",
                   help=f"model config ({', '.join(names)}; default: gpt2 large, gpt3 175b, "
                        "reference)")
    for axis, what in (("data", "data-parallel replicas"), ("tensor", "tensor / spatial shards"),
                       ("pipeline", "pipeline stages")):
        p.add_argument(f"--{axis}", type=int_range(), default=1, metavar="N",
                       help=f"{what} (default 1)")
    p.add_argument("--seq-len", type=int_range(), default=None, metavar="N")
    p.add_argument("--micro-batch", type=int_range(), default=None, metavar="N",
                   help="sequences (GPT), samples per replica (CosmoFlow), per rank (DLRM)")
    p.add_argument("--grad-accum", type=int_range(), default=None, metavar="N",
                   help="micro-batches per iteration (GPT pipelines)")
    p.add_argument("--bucket", default="param",
                   help="gradient all-reduce: param, layer, stage or a size in MiB (GPT)")
    p.add_argument("--tflops", type=float_range(0, lo_open=True), default=100.0,
                   help="modelled compute rate per rank for the emulated kernels (default 100)")
    p.add_argument("--iterations", type=int_range(), default=3, help="replayed iterations (median)")
    p.add_argument("--scale", type=int_range(), default=1, metavar="N",
                   help="replay every message with 1/N of its floats (big models on one node)")
    p.add_argument("--timeout", type=float_range(0, lo_open=True), default=600,
                   help="seconds before the replay fails")
    p.add_argument("--hostfile", default=None, metavar="FILE",
                   help="replay on these hosts, one rank per host in turn (an Open MPI "
                        "hostfile; scripts/cluster.sh writes one)")
    p.add_argument("--dry-run", action="store_true", help="print the proxy; start no MPI")
    x = p.add_argument_group("extrapolation (α-β model; no MPI)")
    x.add_argument("--extrapolate", default=None, metavar="N,N,...",
                   help="node counts (one rank each; data = N / (tensor·pipeline))")
    x.add_argument("--interconnect", default="infiniband-hdr,ethernet-100g",
                   help=f"comma list of {', '.join(ex.INTERCONNECTS)}")
    x.add_argument("--latency-us", type=float_range(0), default=None,
                   help="override the link latency")
    x.add_argument("--bandwidth-gbs", type=float_range(0, lo_open=True), default=None,
                   help="override the link bandwidth (GB/s)")
    x.add_argument("--plot", default=None, metavar="FILE", help="write the extrapolation plot")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_proxy_cli)

    c = subparsers.add_parser("collectives", help="MPI collective benchmark + α-β fit",
                              description="Time allreduce, allgather, reduce-scatter, "
                              "all-to-all and p2p under mpirun, fit α-β per operation on every "
                              "other size and check it on the sizes between.")
    c.add_argument("--ranks", type=int_range(2), default=2, help="ranks (default 2)")
    c.add_argument("--hostfile", default=None, metavar="FILE",
                   help="run on these hosts, one rank per host in turn (an Open MPI "
                        "hostfile; scripts/cluster.sh writes one); default: this machine")
    c.add_argument("--ops", default=",".join(coll.OPS), help="comma list (default: all)")
    c.add_argument("--min-bytes", type=int_range(4), default=8)
    c.add_argument("--max-bytes", type=int_range(4), default=64 * 2**20, help="default 64 MiB")
    c.add_argument("--plot", default=None, metavar="FILE", help="write measured vs model")
    c.add_argument("--timeout", type=float_range(0, lo_open=True), default=600)
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=_collectives_cli)
    # one rank of a replay / of the collective benchmark, started by mpirun
    for name, target in (("_replay-rank", _replay_rank), ("_collectives-rank", _coll_rank)):
        r = subparsers.add_parser(name, help=argparse.SUPPRESS)
        r.add_argument("job", help="the job as JSON")
        r.add_argument("out", help="where rank 0 writes its result")
        r.set_defaults(func=target)
    return p


def _replay_rank(args) -> int:
    die_with_launcher()   # a killed proxy leaves no rank (nntile_lab.orphans)
    return replay.rank_main(args.job, args.out)


def _coll_rank(args) -> int:
    die_with_launcher()   # a killed collectives leaves no rank (nntile_lab.orphans)
    return coll.rank_main(args.job, args.out)


def _collectives_cli(args) -> int:
    if args.ranks < 2:
        raise ValueError(f"--ranks {args.ranks}: the benchmark needs at least 2 ranks")
    if args.max_bytes < args.min_bytes:
        raise ValueError(f"--max-bytes {args.max_bytes} is below --min-bytes {args.min_bytes}: "
                         "give --max-bytes ≥ --min-bytes")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in ops if o not in coll.OPS]
    if not ops or unknown:   # else the ranks would fail on it after mpirun started
        raise UsageError(f"--ops {args.ops!r}: "
                         + (f"{', '.join(map(repr, unknown))} unknown" if unknown else "none")
                         + f"; give a comma list of: {', '.join(coll.OPS)}")
    if args.hostfile:
        read_hostfile(args.hostfile)   # a bad file is named before mpirun starts
    rows = coll.run(args.ranks, ops, coll.default_sizes(args.min_bytes, args.max_bytes),
                    timeout=args.timeout, hostfile=args.hostfile)
    res = coll.fit_and_check(rows)
    if args.plot:
        coll.plot(res, args.plot)
    print(json.dumps(res) if args.json else coll.report(res))
    return 0


def build_kwargs(args) -> dict:
    return {"model": args.model, "config_name": args.config, "data": args.data,
            "tensor": args.tensor, "pipeline": args.pipeline, "seq_len": args.seq_len,
            "micro_batch": args.micro_batch, "grad_accum": args.grad_accum,
            "bucket": args.bucket, "tflops": args.tflops}


def _proxy_cli(args) -> int:
    kw = build_kwargs(args)
    if args.extrapolate:
        try:
            nodes = [int(n) for n in args.extrapolate.split(",") if n]
        except ValueError:
            raise ValueError(f"--extrapolate {args.extrapolate!r}: a comma list of node "
                             "counts, e.g. 1,2,4,8") from None
        try:
            links = [ex.link(n, args.latency_us, args.bandwidth_gbs)
                     for n in args.interconnect.split(",") if n]
        except ValueError as exc:
            raise ValueError(f"--interconnect {args.interconnect}: {exc}") from exc
        try:
            rows = ex.extrapolate(kw, nodes, links)
        except ValueError as exc:   # node counts that do not fit the layout: the option's fault
            raise ValueError(f"--extrapolate {args.extrapolate}: {exc}") from exc
        if args.plot:
            ex.plot(rows, args.plot, f"{args.model} {args.config or ''}: extrapolated")
        print(json.dumps(rows) if args.json else ex.report(rows))
        return 0
    if args.dry_run:
        proxy = models.build(**kw)
        print(json.dumps(proxy.to_dict()) if args.json else proxy.report())
        return 0
    if args.hostfile:
        read_hostfile(args.hostfile)   # a bad file is named before mpirun starts
    res = replay.launch(kw, iterations=args.iterations, scale=args.scale,
                        timeout=args.timeout, hostfile=args.hostfile)
    print(json.dumps(res) if args.json else replay.report(res))
    return 0
