"""Export a trace to the Chrome trace-event JSON format (opens in Perfetto,
https://ui.perfetto.dev, or chrome://tracing).

One complete event (``"ph": "X"``) per task: ``pid`` 0, ``tid`` its worker, ``ts`` and
``dur`` in µs, ``cat`` its phase, ``args`` with layer, phase, step, flops, bytes,
priority and task_id. Metadata events name the process and each worker's thread;
counter events (``"ph": "C"``) carry memory per node.
"""
from __future__ import annotations

import json


def to_chrome(tr) -> dict:
    events = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "nntile_lab"}}]
    for w, name in sorted(set(zip(tr.tasks["worker"], tr.tasks["worker_name"]))):
        events.append({"ph": "M", "pid": 0, "tid": int(w), "name": "thread_name",
                       "args": {"name": name}})
    t = tr.tasks
    for row in zip(t["name"], t["worker"], t["start_us"], t["duration_us"], t["phase"],
                   t["layer"], t["step"], t["flops"], t["bytes"], t["priority"], t["task_id"]):
        name, w, ts, dur, phase, layer, step, flops, nbytes, prio, tid = row
        events.append({"ph": "X", "pid": 0, "tid": int(w), "name": name, "cat": phase,
                       "ts": float(ts), "dur": float(dur),
                       "args": {"layer": int(layer), "phase": phase, "step": int(step),
                                "flops": float(flops), "bytes": float(nbytes),
                                "priority": int(prio), "task_id": int(tid)}})
    for ts, name, used in zip(tr.memory["t_us"], tr.memory["name"], tr.memory["used_bytes"]):
        events.append({"ph": "C", "pid": 0, "name": f"memory {name}", "ts": float(ts),
                       "args": {"MiB": float(used) / (1 << 20)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome(tr, path: str) -> str:
    with open(path, "w") as f:
        json.dump(to_chrome(tr), f)
    return path
