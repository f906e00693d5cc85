"""``nntile-lab proxy {gpt2,gpt3,cosmoflow,dlrm}``: derive (and replay) a proxy's messages."""
from __future__ import annotations

import json


def register_cli(subparsers):
    from nntile_lab.dist.proxies import CONFIGS, MODELS
    p = subparsers.add_parser(
        "proxy", help="communication of one training iteration of GPT-2/GPT-3/CosmoFlow/DLRM",
        description=__doc__ + " Without --dry-run the plan is replayed with mpi4py under "
        "mpirun on data·tensor·pipeline local ranks.")
    p.add_argument("model", choices=MODELS)
    names = sorted({n for c in CONFIGS.values() for n in c})
    p.add_argument("--config", default=None, metavar="NAME",
                   help=f"model config ({', '.join(names)}; default: gpt2 large, gpt3 175b, "
                        "reference)")
    for axis, what in (("data", "data-parallel replicas"), ("tensor", "tensor / spatial shards"),
                       ("pipeline", "pipeline stages")):
        p.add_argument(f"--{axis}", type=int, default=1, metavar="N", help=f"{what} (default 1)")
    p.add_argument("--seq-len", type=int, default=None, metavar="N")
    p.add_argument("--micro-batch", type=int, default=None, metavar="N",
                   help="sequences (GPT), samples per replica (CosmoFlow), per rank (DLRM)")
    p.add_argument("--grad-accum", type=int, default=None, metavar="N",
                   help="micro-batches per iteration (GPT pipelines)")
    p.add_argument("--bucket", default="param",
                   help="gradient all-reduce: param, layer, stage or a size in MiB (GPT)")
    p.add_argument("--tflops", type=float, default=100.0,
                   help="modelled compute rate per rank for the emulated kernels (default 100)")
    p.add_argument("--iterations", type=int, default=3, help="replayed iterations (median)")
    p.add_argument("--scale", type=int, default=1, metavar="N",
                   help="replay every message with 1/N of its floats (big models on one node)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the replay fails")
    p.add_argument("--dry-run", action="store_true", help="print the plan; start no MPI")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_proxy_cli)
    return p


def build_kwargs(args) -> dict:
    return {"model": args.model, "config_name": args.config, "data": args.data,
            "tensor": args.tensor, "pipeline": args.pipeline, "seq_len": args.seq_len,
            "micro_batch": args.micro_batch, "grad_accum": args.grad_accum,
            "bucket": args.bucket, "tflops": args.tflops}


def _proxy_cli(args) -> int:
    from nntile_lab.dist import proxies, replay
    kw = build_kwargs(args)
    if args.dry_run:
        plan = proxies.build(**kw)
        print(json.dumps(plan.to_dict()) if args.json else plan.report())
        return 0
    res = replay.launch(kw, iterations=args.iterations, scale=args.scale,
                        timeout=args.timeout)
    print(json.dumps(res) if args.json else replay.report(res))
    return 0
