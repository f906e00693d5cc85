"""``nntile-lab _sweep-point < job.json``: one sweep point in the fresh process that measures
it (hidden; sweep.worker). Apart from sweep/cli.py: the point's peak RSS is part of its result,
so its process imports only the worker, not the sweep's plotting."""
from __future__ import annotations

import argparse

from nntile_lab.sweep import worker


def register_cli(subparsers) -> None:
    w = subparsers.add_parser("_sweep-point", help=argparse.SUPPRESS)   # reads its job on stdin
    w.set_defaults(func=lambda args: worker.main())
