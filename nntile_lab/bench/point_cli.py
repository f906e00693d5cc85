"""``nntile-lab _bench-memory-point SYSTEM SPEC``: one point of ``bench memory`` in the fresh
process that measures it (hidden). Apart from bench/cli.py: the process's peak RSS is the
measurement, so it imports only what the point runs (bench.memory), not every benchmark."""
from __future__ import annotations

import argparse
import json

from nntile_lab.bench import memory
from nntile_lab.orphans import die_with_parent
from nntile_lab.spec import ExperimentSpec


def register_cli(subparsers) -> None:
    pt = subparsers.add_parser("_bench-memory-point", help=argparse.SUPPRESS)
    pt.add_argument("system", choices=("nntile", "nntile-device", "torch"))
    pt.add_argument("spec", help="the spec as JSON")
    pt.set_defaults(func=_memory_point)


def _memory_point(args) -> int:
    """One point of ``bench memory``: its JSON on the last line of stdout."""
    die_with_parent()   # a killed bench memory leaves no orphan point
    spec = ExperimentSpec.from_dict(json.loads(args.spec))
    res = (memory.torch_point(spec) if args.system == "torch" else
           memory.measure_point(spec, device_first=args.system == "nntile-device"))
    print(json.dumps(res), flush=True)
    return 0
