"""The ``mpirun`` line that starts local ranks: for training (``train --ranks N``), the
StarPU-MPI tests and the communication proxies' replay and collective benchmarks."""
from __future__ import annotations

import os
import shutil


def mpirun_command(n: int, argv: list[str], *, extra_env: dict | None = None) -> list[str]:
    """The mpirun line for ``n`` local ranks of ``argv`` (oversubscribed; as root allowed)."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError("mpirun not found: install Open MPI (apt-get install openmpi-bin "
                           "libopenmpi-dev, or scripts/setup.sh test)")
    cmd = [mpirun, "-n", str(n), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for k, v in (extra_env or {}).items():
        cmd += ["-x", f"{k}={v}"]
    return cmd + list(argv)


def under_mpirun() -> bool:
    return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ
