"""Jupyter's "interrupt kernel" in a real ipykernel process (SIGINT, as JupyterLab sends
it): the cell stops with KeyboardInterrupt within seconds, in the first runtime and in a
later one, and the same kernel then computes correctly. Every wait has a time limit."""
import time

import pytest

from tests.jupyter_kernel import execute, running_kernel

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
    with running_kernel(tmp_path) as (km, kc):
        yield km, kc


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
