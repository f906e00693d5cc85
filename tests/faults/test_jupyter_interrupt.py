"""Jupyter's "interrupt kernel" in a real ipykernel process (SIGINT, as JupyterLab sends
it): the cell stops with KeyboardInterrupt within seconds, in the first runtime and in a
later one, and the same kernel then computes correctly. Every wait has a time limit."""
import time

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from tests.jupyter_kernel import KERNEL_NAME, write_kernel_spec

SETUP = """
import numpy as np, nntile_lab as nl
rng = np.random.default_rng(0)
def work():
    a = rng.standard_normal((96, 96)).astype(np.float32)
    ta = nl.from_numpy(a, (32, 32))
    c = nl.ops.gemm(ta, ta)
    assert np.allclose(c.to_numpy(), a @ a, rtol=1e-4, atol=1e-3)
    for _ in range(20):
        c = nl.ops.scale(nl.ops.gemm(c, ta), 1e-2)
    nl.Runtime.current().wait()
"""
LOOP = "print('LOOPING', flush=True)\nwhile True:\n    work()\n"


@pytest.fixture
def kernel(tmp_path):
    root = write_kernel_spec(tmp_path)
    km = KernelManager(kernel_name=KERNEL_NAME,
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root / "kernels")]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc, code, timeout, on_output=None):
    """Run ``code``; return (reply content, stdout). Fails if no reply within ``timeout``."""
    msg_id = kc.execute(code)
    out, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except Exception:   # queue.Empty
            msg = None
        if msg and msg["parent_header"].get("msg_id") == msg_id:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
                if on_output:
                    on_output("".join(out))
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                # the execute reply: a slow kernel start leaves wait_for_ready's extra
                # kernel_info replies before it
                while True:
                    reply = kc.get_shell_msg(timeout=10)
                    if reply["parent_header"].get("msg_id") == msg_id:
                        return reply["content"], "".join(out)
    raise AssertionError(f"the kernel did not answer within {timeout} s: {''.join(out)!r}")


def interrupt_loop(km, kc):
    sent = []

    def once_looping(text):
        if "LOOPING" in text and not sent:
            time.sleep(0.3)
            sent.append(time.monotonic())
            km.interrupt_kernel()

    reply, _ = execute(kc, LOOP, timeout=60, on_output=once_looping)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert time.monotonic() - sent[0] < 5


def test_interrupt_kernel_is_harmless(kernel):
    km, kc = kernel
    reply, _ = execute(kc, SETUP + "rt = nl.Runtime(ncpu=2)\n", timeout=60)
    assert reply["status"] == "ok", reply
    interrupt_loop(km, kc)                     # the first runtime
    interrupt_loop(km, kc)                     # the same one again
    reply, _ = execute(kc, "rt.stop()\nrt = nl.Runtime(ncpu=2)\n", timeout=60)
    assert reply["status"] == "ok", reply
    interrupt_loop(km, kc)                     # a later runtime (used to hang for good)
    reply, out = execute(kc, "rt.stop()\nwith nl.Runtime(ncpu=2):\n    work()\n"
                             "print('FINE', nl.Runtime.active)\n", timeout=60)
    assert reply["status"] == "ok" and "FINE None" in out, (reply, out)
