"""A Jupyter kernel spec for tests: this interpreter, this checkout, smoke sizes.

Notebooks are run by a real kernel (a separate ``ipykernel`` process, as in JupyterLab), not
as plain Python: what differs — display hooks, widget comms, the inline plot backend, the
kernel's working directory and environment — is what a user meets.
"""
from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import time
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


@contextlib.contextmanager
def running_kernel(root: Path, cwd: Path | None = None):
    """A real ipykernel of this checkout (spec written under ``root``), started in ``cwd``
    and ready; yields ``(kernel manager, client)``; shut down whatever happens."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    specs = KernelSpecManager(kernel_dirs=[str(write_kernel_spec(root) / "kernels")])
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    km.start_kernel(**({"cwd": str(cwd)} if cwd is not None else {}))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc, code: str, timeout: float, on_output=None,
            subshell_id: str | None = None, on_message=None) -> tuple[dict, str]:
    """Run ``code`` in the kernel (in a subshell's thread with ``subshell_id``); return (its
    reply's content, its stdout). ``on_output(stdout so far)`` after each stream message,
    ``on_message(msg)`` after each IOPub message the request caused (widget updates too).
    Fails if no reply within ``timeout``. The reply is matched by its msg_id: a slow kernel
    start leaves ``wait_for_ready``'s extra kernel_info replies first."""
    msg = kc.session.msg("execute_request", {
        "code": code, "silent": False, "store_history": False, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": True})
    if subshell_id is not None:
        msg["header"]["subshell_id"] = subshell_id
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    out, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            m = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if on_message:
            on_message(m)
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
            if on_output:
                on_output("".join(out))
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            while time.monotonic() < end:
                reply = kc.get_shell_msg(timeout=max(1.0, end - time.monotonic()))
                if reply["parent_header"].get("msg_id") == msg_id:
                    return reply["content"], "".join(out)
    raise AssertionError(f"the kernel did not answer within {timeout} s: {''.join(out)!r}")
