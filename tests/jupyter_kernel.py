"""A Jupyter kernel spec for tests: this interpreter, this checkout, smoke sizes.

Notebooks are run by a real kernel (a separate ``ipykernel`` process, as in JupyterLab), not
as plain Python: what differs — display hooks, widget comms, the inline plot backend, the
kernel's working directory and environment — is what a user meets.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
# notebooks name "python3" in their metadata; a spec of that name earlier on the kernel path wins
KERNEL_NAME = "python3"


def kernel_env(root: Path) -> dict[str, str]:
    """What the kernel adds to the inherited environment: this checkout first on the path, a
    cache of its own under ``root`` (a test measures, never reads a user's cache), the
    notebooks' ``runs/`` under ``root`` (never the checkout's), and smoke sizes unless the
    caller chose (``NNTILE_LAB_SMOKE=0`` runs the notebooks full size)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "NNTILE_LAB_SMOKE": os.environ.get("NNTILE_LAB_SMOKE", "1"),
            "NNTILE_LAB_CACHE": str(root / "cache"), "NNTILE_LAB_RUNS": str(root / "runs")}


def write_kernel_spec(root: Path) -> Path:
    """Write ``root/kernels/python3/kernel.json`` running this interpreter's ipykernel;
    returns ``root`` (put it first on ``JUPYTER_PATH``, or pass ``root/kernels`` to a
    ``KernelSpecManager``)."""
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "nntile_lab (tests)", "language": "python",
            "env": kernel_env(root), "metadata": {"debugger": False}}
    d = root / "kernels" / KERNEL_NAME
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.json").write_text(json.dumps(spec, indent=1))
    return root
