"""Kernel → Interrupt and the Stop button end a widget's sweep within 2 s however many
times it was started, in a real ipykernel 7 process (SIGINT to its process group, as
JupyterLab's interrupt sends it), whichever thread runs it: the Run button's clicks as
JupyterLab sends them (comm messages over a subshell: ipykernel handles them on its main
thread first, in the subshell's thread later) and ``run()`` executed in a subshell, where
SIGINT never arrives. The kernel is shown busy while a button's sweep runs. Every wait
has a time limit; the browser test (tests/browser) does the same through JupyterLab."""
from __future__ import annotations

import queue
import time

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from tests.jupyter_kernel import KERNEL_NAME, write_kernel_spec

STOP_S = 2.0          # the promise
START_S = 120         # a point's process under way, on a loaded machine
# each point runs for minutes: only an interrupt ends it
SETUP = """
from nntile_lab.spec import ExperimentSpec
from nntile_lab.widgets import TileSweep
base = ExperimentSpec(n_layer=1, n_head=2, n_embd=16, vocab_size=64, seq_len=8, batch=2,
                      warmup_steps=1, measure_steps=200000, ncpu=1)
ts = TileSweep(base, {{"batch_tile": "1,2"}}, cache_dir={cache!r}, peak_gflops=1.0,
               isolate={isolate})
print(ts.run_button.model_id, ts.stop_button.model_id, ts.status.model_id)
"""


@pytest.fixture
def kernel(tmp_path):
    root = write_kernel_spec(tmp_path)
    km = KernelManager(kernel_name=KERNEL_NAME,
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root / "kernels")]))
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _send(kc, channel, msg_type: str, content: dict, subshell_id=None) -> str:
    msg = kc.session.msg(msg_type, content)
    if subshell_id is not None:
        msg["header"]["subshell_id"] = subshell_id
    getattr(kc, f"{channel}_channel").send(msg)
    return msg["header"]["msg_id"]


def _subshell(kc) -> str:
    msg_id = _send(kc, "control", "create_subshell_request", {})
    end = time.monotonic() + 30
    while time.monotonic() < end:
        reply = kc.control_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]["subshell_id"]
    raise AssertionError("no create_subshell_reply")


def _iopub_until(kc, predicate, timeout: float, seen: list | None = None):
    """Read IOPub until ``predicate(msg)`` holds; that message (fails past ``timeout``).
    Every message read is appended to ``seen``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        if seen is not None:
            seen.append(msg)
        if predicate(msg):
            return msg
    raise AssertionError(f"nothing matched within {timeout} s")


def _execute(kc, code: str, timeout: float, subshell_id=None) -> tuple[dict, str]:
    msg_id = _send(kc, "shell", "execute_request",
                   {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                   subshell_id)
    out = []

    def done(msg):
        if msg["parent_header"].get("msg_id") != msg_id:
            return False
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        return msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
    _iopub_until(kc, done, timeout)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"], "".join(out)
    raise AssertionError("no execute_reply")


def _status_update(comm_id: str, prefix: str):
    def match(msg):
        c = msg["content"]
        return (msg["msg_type"] == "comm_msg" and c.get("comm_id") == comm_id
                and str(c["data"].get("state", {}).get("value", "")).startswith(prefix))
    return match


def test_interrupt_and_stop_end_every_button_started_sweep(kernel, tmp_path):
    km, kc = kernel
    reply, out = _execute(kc, SETUP.format(cache=str(tmp_path / "cache"), isolate=True),
                          timeout=180)
    assert reply["status"] == "ok", reply
    run_id, stop_id, status_id = out.split()
    subshell = _subshell(kc)       # JupyterLab sends widget messages over one
    click = {"method": "custom", "content": {"event": "click"}}
    for attempt, how in enumerate(("interrupt", "interrupt", "stop", "interrupt")):
        seen = []
        _send(kc, "shell", "comm_msg", {"comm_id": run_id, "data": click}, subshell)
        _iopub_until(kc, _status_update(status_id, "running: 0 of 2"), START_S, seen)
        time.sleep(1.0)            # the first point's process is starting or measuring
        asked = time.monotonic()
        if how == "interrupt":
            km.interrupt_kernel()
        else:
            _send(kc, "shell", "comm_msg", {"comm_id": stop_id, "data": click}, subshell)
        word = "interrupted" if how == "interrupt" else "stopped"
        _iopub_until(kc, _status_update(status_id, f"{word} after 0 of 2 points"), 30, seen)
        took = time.monotonic() - asked
        assert took < STOP_S, (attempt, how, took)
        # busy while it ran: said again after any other message's "idle"
        states = [m["content"]["execution_state"] for m in seen
                  if m["msg_type"] == "status" and m["parent_header"].get("msg_type")
                  == "comm_msg"]
        assert states.count("busy") >= 3, states
        # it ended; nothing of the stopped point was cached; the kernel answers
        reply, out = _execute(kc, "print(ts.wait(10), len(list(__import__('pathlib').Path("
                                  f"{str(tmp_path / 'cache')!r}).glob('*.json'))), "
                                  "type(ts.background.error).__name__)", timeout=60)
        assert reply["status"] == "ok" and out.split() == ["True", "0", "Interrupted"], out


@pytest.mark.parametrize("isolate", [False, True])
def test_interrupt_reaches_a_sweep_run_in_a_subshell_thread(kernel, tmp_path, isolate):
    """``ts.run()`` executed in a subshell (a thread where SIGINT is never delivered) ends
    with the one line within 2 s of Kernel → Interrupt: its points measured in the
    kernel's process (only the main thread's handler can stop them) or each in a child
    (which the interrupt reaches too)."""
    km, kc = kernel
    reply, out = _execute(kc, SETUP.format(cache=str(tmp_path / "cache"), isolate=isolate),
                          timeout=180)
    assert reply["status"] == "ok", reply
    status_id = out.split()[2]
    subshell = _subshell(kc)
    msg_id = _send(kc, "shell", "execute_request",
                   {"code": "ts.run()", "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                   subshell)
    _iopub_until(kc, _status_update(status_id, "running: 0 of 2"), START_S)
    time.sleep(1.0)
    asked = time.monotonic()
    km.interrupt_kernel()
    _iopub_until(kc, lambda m: m["parent_header"].get("msg_id") == msg_id
                 and m["msg_type"] == "error", 30)
    took = time.monotonic() - asked
    end = time.monotonic() + 30
    while time.monotonic() < end:
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    content = reply["content"]
    assert content["status"] == "error" and content["ename"] == "Interrupted", content
    assert content["traceback"] == ["Interrupted: sweep stopped after 0 of 2 points; the "
                                    "finished ones are cached: run it again to resume"]
    assert took < STOP_S, took
