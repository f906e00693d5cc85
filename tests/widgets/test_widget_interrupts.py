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

from tests.jupyter_kernel import execute, running_kernel

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
    with running_kernel(tmp_path, cwd=tmp_path) as (km, kc):
        yield km, kc


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


def _iopub_until(kc, predicate, timeout: float, seen: list):
    """Read IOPub (each message appended to ``seen``) until ``predicate(msg)`` holds;
    fails past ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        seen.append(msg)
        if predicate(msg):
            return msg
    raise AssertionError(f"nothing matched within {timeout} s")


def _status_update(comm_id: str, prefix: str):
    def match(msg):
        c = msg["content"]
        return (msg["msg_type"] == "comm_msg" and c.get("comm_id") == comm_id
                and str(c["data"].get("state", {}).get("value", "")).startswith(prefix))
    return match


def test_interrupt_and_stop_end_every_button_started_sweep(kernel, tmp_path):
    km, kc = kernel
    reply, out = execute(kc, SETUP.format(cache=str(tmp_path / "cache"), isolate=True),
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
        reply, out = execute(kc, "print(ts.wait(10), len(list(__import__('pathlib').Path("
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
    reply, out = execute(kc, SETUP.format(cache=str(tmp_path / "cache"), isolate=isolate),
                          timeout=180)
    assert reply["status"] == "ok", reply
    status_id = out.split()[2]
    subshell = _subshell(kc)
    asked = []

    def interrupt_once_running(msg):
        if not asked and _status_update(status_id, "running: 0 of 2")(msg):
            time.sleep(1.0)        # the first point is starting or measuring
            asked.append(time.monotonic())
            km.interrupt_kernel()
    content, _ = execute(kc, "ts.run()", START_S, subshell_id=subshell,
                         on_message=interrupt_once_running)
    took = time.monotonic() - asked[0]
    assert content["status"] == "error" and content["ename"] == "Interrupted", content
    assert content["traceback"] == ["Interrupted: sweep stopped after 0 of 2 points; the "
                                    "finished ones are cached: run it again to resume"]
    assert took < STOP_S, took


def _message_update(comm_id: str, text: str):
    def match(msg):
        c = msg["content"]
        return (msg["msg_type"] == "comm_msg" and c.get("comm_id") == comm_id
                and text in str(c["data"].get("state", {}).get("value", "")))
    return match


def test_a_click_reads_what_was_typed_before_it(kernel, tmp_path):
    """The Run button's action reads the boxes as typed before the click: ipykernel 7
    handles a box's update on its main thread and, from the second click on, the click in
    a subshell's thread, so the click can come first (seen in JupyterLab: Run after typing
    128 over 2.5 still read 2.5). Here the main thread is busy (a cell sleeping) when the
    update arrives, so the click's thread is ahead of it every time: the action must
    wait for the update (widgets/background.py: let_inputs_arrive)."""
    km, kc = kernel
    reply, out = execute(kc, SETUP.format(cache=str(tmp_path / "cache"), isolate=True)
                         + "print(ts.tiles['batch_tile'].model_id, ts.message.model_id)",
                         timeout=180)
    assert reply["status"] == "ok", reply
    run_id, stop_id, status_id, tile_id, message_id = out.split()
    subshell = _subshell(kc)
    click = {"method": "custom", "content": {"event": "click"}}
    # a first sweep, stopped: ipykernel handles this click on its main thread, the later
    # ones in the subshell's (the sweep's button updates answer the subshell's click)
    seen = []
    _send(kc, "shell", "comm_msg", {"comm_id": run_id, "data": click}, subshell)
    _iopub_until(kc, _status_update(status_id, "running: 0 of 2"), START_S, seen)
    _send(kc, "shell", "comm_msg", {"comm_id": stop_id, "data": click}, subshell)
    _iopub_until(kc, _status_update(status_id, "stopped after 0 of 2 points"), 30, seen)
    refused, started = (_message_update(message_id, "Error:"),
                        _status_update(status_id, "running: "))
    # each value a range refused before any point runs, naming its LOW: which one was read
    for low in (3, 5, 7, 9):
        seen = []
        _send(kc, "shell", "execute_request", {
            "code": "import time; time.sleep(0.5)", "silent": True, "store_history": False,
            "user_expressions": {}, "allow_stdin": False, "stop_on_error": False})
        time.sleep(0.1)                      # the main thread is in the cell's sleep
        _send(kc, "shell", "comm_msg", {"comm_id": tile_id, "data": {
            "method": "update", "state": {"value": f"{low}:1:1"}, "buffer_paths": []}})
        _send(kc, "shell", "comm_msg", {"comm_id": run_id, "data": click}, subshell)
        msg = _iopub_until(kc, lambda m: refused(m) or started(m), 60, seen)
        if started(msg):                     # it read the first sweep's tiles: stop it
            _send(kc, "shell", "comm_msg", {"comm_id": stop_id, "data": click}, subshell)
            _iopub_until(kc, _status_update(status_id, "stopped after "), 30, seen)
            raise AssertionError(f"the click read the tiles before {low}:1:1 was typed")
        said = msg["content"]["data"]["state"]["value"]
        assert f"batch_tile &#x27;{low}:1:1&#x27;: LOW={low} is above HIGH=1" in said, \
            (low, said)
