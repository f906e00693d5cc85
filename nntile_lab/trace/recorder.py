"""Collect a run's trace: per-task records, worker and bus counters, memory samples.

``Trace(rt)`` records everything submitted between ``start()`` and ``stop()``
(or inside ``with Trace(rt) as tr:``). The records are taken in C: a StarPU
callback copies each finished task's profiling times into an array, a C thread
samples memory every ``memory_period_ms``; Python only drains them at ``stop()``.
If the runtime was started without ``profiling=True`` the trace turns StarPU's
profiling on for its duration. ``Trace(rt, memory_period_ms=5.0, bound=False)``:
the sampling period, and whether to record tasks for StarPU's LP bound (off by
default: recording them costs ~3% of a small step). One
trace records at a time; ``stop()`` waits for every submitted task.

After ``stop()`` a trace holds plain pandas tables and no StarPU state, so it
outlives the runtime. Times are µs since ``start()``.

``tasks``     one row per task: task_id (submission order), name (the op), worker,
              worker_name, layer (-1: none), phase, priority, step, submit_us,
              ready_us (dependencies met, pushed to the scheduler), acquire_us (its
              data in place), start_us, end_us, duration_us, flops, bytes (sum of
              its buffers' sizes).
``accesses``  task_id, handle (the StarPU handle as an integer), mode (StarPU's
              access bits: R 1, W 2, REDUX 8, COMMUTE 16), in the task's buffer
              order: what ``metrics.task_graph`` rebuilds the dependencies from.
``workers``   worker, name, total_us, executing_us, sleeping_us, overhead_us (the
              rest: scheduling, data management), tasks, flops.
``buses``     bus, src, dst (memory node names), bytes, transfers, time_us; empty on a
              CPU-only machine without a disk node (no data ever moves).
``memory``    t_us, node, name, used_bytes: StarPU's own accounting of each memory
              node (total − available; StarPU 1.3 sizes RAM from hwloc when no
              limit is set, so it works with or without ``memory_limit_mb``), and
              node -1, "registered tiles": bytes of the tiles registered at that
              moment (an upper bound that counts tiles not yet written), the
              fallback where a node has no accounting.
``nodes``     node, name, kind (RAM, device, disk), capacity_bytes (what StarPU may
              allocate there), capped (a limit was set: memory_limit_mb,
              opencl_memory_limit_mb or cuda_memory_limit_mb, the disk node's size): per
              memory node, for the memory timeline per node (``tables.node_timeline``)
              against its cap.
``steps``     step, start_us, end_us, seconds, tokens, tasks, flops, gflops,
              tokens_per_s: one row per ``mark_step()`` call.
``bound``     StarPU's linear-programming lower bound of the makespan (work spread
              over the workers, dependencies ignored), from the history performance
              models: ``{"bound_us": float | None, "note": str}``. The models need
              about ten runs of each (op, tile size) before the bound exists; until
              then ``bound_us`` is None and the note says why.

``mark_step(tokens)`` closes a training step once its tasks are done; tasks are
assigned to the step in which they were submitted. ``memory_by_category(model, optimizer)`` splits
memory into parameters, gradients, optimizer state and activations (the rest of
what StarPU holds at its peak).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from nntile_lab._lib import ffi, lib
from nntile_lab.data.bins import atomic_write_bytes
from nntile_lab.runtime import PHASES, Runtime, wait_interruptibly
from nntile_lab.trace.tables import REGISTERED_NODE, node_kind, peak_used, used_over_time

TASK_COLUMNS = ["task_id", "name", "worker", "worker_name", "layer", "phase", "priority", "step",
                "submit_us", "ready_us", "acquire_us", "start_us", "end_us", "duration_us",
                "flops", "bytes"]


TABLES = ("tasks", "accesses", "workers", "buses", "memory", "steps")
# columns a saved table cannot do without, each a number in every row: a line cut short
# (a killed save, a copy that stopped) leaves them empty
REQUIRED = {"tasks": ("task_id", "worker", "submit_us", "start_us", "end_us", "duration_us"),
            "accesses": ("task_id", "handle", "mode"), "steps": ("step", "start_us", "end_us")}


class TraceError(ValueError):
    """A trace directory that is not a whole saved trace (the message names the file)."""


def _read_meta(directory: str) -> dict:
    path = os.path.join(directory, "meta.json")
    try:
        with open(path) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise TraceError(f"{path} is missing: {directory} is not a saved trace, or its save "
                         "was cut short (meta.json is written last); record the trace "
                         "again") from None
    except (OSError, ValueError) as exc:
        raise TraceError(f"{path} is damaged ({exc}); record the trace again") from None
    missing = [k for k in ("duration_us", "bound", "static_memory")
               if not isinstance(meta, dict) or k not in meta]
    if missing or not isinstance(meta.get("rows", {}), dict):
        raise TraceError(f"{path} is damaged (no {', '.join(missing) or 'row counts'}); "
                         "record the trace again")
    return meta


def _read_table(directory: str, name: str, rows: int | None) -> pd.DataFrame:
    path = os.path.join(directory, f"{name}.csv")
    try:
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except pd.errors.EmptyDataError:
        table = pd.DataFrame()
    except FileNotFoundError:
        raise TraceError(f"{path} is missing; record the trace again") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise TraceError(f"{path} is damaged ({type(exc).__name__}: "
                         f"{str(exc).strip()[:200]}); record the trace again") from None
    if rows is not None and len(table) != rows:
        raise TraceError(f"{path} has {len(table)} rows, meta.json says {rows}: the table "
                         "is partial (cut short?); record the trace again")
    need = REQUIRED.get(name, ()) if len(table) else ()
    for col in need:
        if col not in table.columns:
            raise TraceError(f"{path} has no {col!r} column: not a saved trace table; "
                             "record the trace again")
        values = pd.to_numeric(table[col], errors="coerce")
        bad = values.isna().to_numpy().nonzero()[0]
        if len(bad):
            raise TraceError(f"{path} row {bad[0] + 2} has no number in {col!r} (a line "
                             "cut short?): the table is damaged; record the trace again")
    return table


class Trace:
    """Records a run; see the module docstring for the tables it holds."""

    _active: Trace | None = None

    def __init__(self, runtime: Runtime | None = None, *, memory_period_ms: float = 5.0,
                 bound: bool = False):
        if memory_period_ms <= 0:
            raise ValueError(f"memory_period_ms={memory_period_ms!r} must be > 0")
        self.runtime = runtime or Runtime.current()
        self.memory_period_ms, self.record_bound = memory_period_ms, bound
        self.tasks = pd.DataFrame(columns=TASK_COLUMNS)
        self.accesses = pd.DataFrame(columns=["task_id", "handle", "mode"])
        self.workers = self.buses = self.memory = self.steps = pd.DataFrame()
        self.bound = {"bound_us": None, "note": "not recorded"}
        self.nodes = pd.DataFrame(columns=NODE_COLUMNS)
        self.static_memory: dict[str, int] = {}
        self.duration_us = 0.0
        self.running = False
        self._marks: list[tuple[float, int | None]] = []

    # ---- recording ---------------------------------------------------------------
    def start(self) -> Trace:
        rt = self.runtime
        rt.check_alive()
        if Trace._active is not None and Trace._active.runtime.alive:
            raise RuntimeError("another Trace is recording: stop it first (one per runtime)")
        self._prev_profiling = lib.starpu_profiling_status_set(lib.STARPU_PROFILING_ENABLE)
        for w in range(rt.nworkers):      # reading resets the counters
            lib.nl_worker_stats(w, ffi.NULL)
        for b in range(lib.starpu_bus_get_count()):
            lib.nl_bus_stats(b, ffi.NULL)
        lib.nl_trace_clear()
        drain_samples()                  # drop samples left by an earlier trace
        if self.record_bound:
            lib.starpu_bound_start(0, 0)
        self.t0 = lib.starpu_timing_now()
        self._marks = []
        lib.nl_trace_enable(1)
        ret = lib.nl_sampler_start(self.memory_period_ms)
        if ret:
            lib.nl_trace_enable(0)
            raise RuntimeError(f"could not start the memory sampler: {os.strerror(-ret)}")
        Trace._active, self.running = self, True
        return self

    def mark_step(self, tokens: int | None = None) -> None:
        """End of a training step (``tokens``: tokens it processed, for tokens/s). Waits
        for the tasks submitted so far: the step ends when its last task does (the
        optimizer's tasks run after ``forward_backward`` returns; a mark taken before them
        cut them out of the step's time and out of ``viz.gantt(tr, step=...)``)."""
        if not self.running:
            raise RuntimeError("mark_step() needs a running trace: call start() first")
        if self.runtime.alive:
            wait_interruptibly(lib.nl_wait_all)   # Ctrl-C still works here
        self._marks.append((lib.starpu_timing_now() - self.t0, tokens))

    def stop(self) -> Trace:
        """Wait for the submitted tasks, then collect every table."""
        if not self.running:
            return self
        rt = self.runtime
        try:
            if rt.alive:
                wait_interruptibly(lib.nl_wait_all)   # Ctrl-C still works here
        finally:
            lib.nl_trace_enable(0)
            lib.nl_sampler_stop()
            if self.record_bound:
                lib.starpu_bound_stop()  # StarPU's flag outlives the runtime: always clear it
            Trace._active, self.running = None, False
        self._collect_tasks()
        self.memory = _memory_table(drain_samples(), self.t0)
        if rt.alive:
            self.duration_us = lib.starpu_timing_now() - self.t0
            self.workers = _worker_table(rt.nworkers)
            self.buses = _bus_table()
            self.nodes = _node_table(rt)
            self.bound = _bound() if self.record_bound else self.bound
            if not self._prev_profiling:
                lib.starpu_profiling_status_set(lib.STARPU_PROFILING_DISABLE)
        self.steps = self._step_table()
        rt.raise_task_error()
        return self

    def __enter__(self) -> Trace:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- memory by category ----------------------------------------------------------
    def memory_by_category(self, model, optimizer=None) -> dict[str, int]:
        """Bytes of parameters, gradients, optimizer state (``optimizer.state``: slot →
        name → tensor) and activations: the peak of what StarPU held during the trace
        minus the other three (temporaries included). Call it while the model lives;
        the figures use the result."""
        opt = [t for slot in getattr(optimizer, "state", {}).values() for t in slot.values()]
        self.static_memory = {"parameters": tensor_bytes(model.params.values()),
                              "gradients": tensor_bytes(model.grads.values()),
                              "optimizer state": tensor_bytes(opt)}
        if self.running:
            lib.nl_memory_sample()
            peak = peak_used(_memory_table(drain_samples(keep=True), self.t0))
        else:
            peak = peak_used(self.memory)
        return self.categories(peak)

    def categories(self, used: float | None = None) -> dict[str, int]:
        """Static categories plus activations = ``used`` (default: the peak) − them."""
        if not self.static_memory:
            return {}
        used = peak_used(self.memory) if used is None else used
        static = sum(self.static_memory.values())
        return {**self.static_memory, "activations": int(max(0, used - static))}

    def category_timeline(self) -> pd.DataFrame:
        """Memory over time split by category (columns: t_us and one per category)."""
        used = used_over_time(self.memory)
        if not self.static_memory or used.empty:
            return pd.DataFrame()
        out = pd.DataFrame({"t_us": used.index})
        for k, v in self.static_memory.items():
            out[k] = v
        out["activations"] = np.maximum(0, used.to_numpy() - sum(self.static_memory.values()))
        return out

    # ---- persistence -----------------------------------------------------------------
    def save(self, directory: str) -> None:
        """Write every table as CSV plus meta.json (``Trace.load`` reads them back). Each
        file is written atomically and meta.json, which counts every table's rows, last:
        a save cut short is found out on load, never shown as a whole trace."""
        os.makedirs(directory, exist_ok=True)
        stale = os.path.join(directory, "meta.json")
        if os.path.exists(stale):
            os.unlink(stale)   # the tables change first: no moment with old counts
        for name in TABLES:
            atomic_write_bytes(os.path.join(directory, f"{name}.csv"),
                               getattr(self, name).to_csv(index=False).encode())
        atomic_write_bytes(os.path.join(directory, "meta.json"), json.dumps(
            {"duration_us": self.duration_us, "bound": self.bound,
             "static_memory": self.static_memory, "nodes": self.nodes.to_dict("records"),
             "rows": {name: len(getattr(self, name)) for name in TABLES}}, indent=1).encode())

    @classmethod
    def load(cls, directory: str) -> Trace:
        """A trace saved by ``save``; TraceError naming the file when the directory is not
        a whole saved trace (missing or damaged files, tables cut short)."""
        directory = str(directory)
        if not os.path.isdir(directory):
            raise TraceError(f"trace directory {directory} does not exist or is not a "
                             "directory: give a directory written by Trace.save (a sweep's "
                             "trace_dir)")
        meta = _read_meta(directory)
        tr = object.__new__(cls)
        tr.runtime, tr.running, tr._marks = None, False, []
        for name in TABLES:
            setattr(tr, name, _read_table(directory, name, (meta.get("rows") or {}).get(name)))
        tr.duration_us, tr.bound = meta["duration_us"], meta["bound"]
        tr.static_memory = meta["static_memory"]
        # traces saved before the nodes were recorded have none
        tr.nodes = pd.DataFrame(meta.get("nodes") or [], columns=NODE_COLUMNS)
        return tr

    # ---- internals ---------------------------------------------------------------------
    def _collect_tasks(self) -> None:
        n = lib.nl_trace_count()
        buf = ffi.new("struct nl_task_record[]", max(n, 1))
        n = lib.nl_trace_drain(buf, n)
        rec = np.frombuffer(ffi.buffer(buf, n * ffi.sizeof("struct nl_task_record")),
                            _RECORD_DTYPE).copy()
        rec = rec[np.argsort(rec["task_id"], kind="stable")]
        names = np.array([ffi.string(lib.nl_op_name(i)).decode() for i in range(lib.nl_op_count())]
                         or [""], dtype=object)
        workers = _worker_names(self.runtime)
        t = pd.DataFrame({
            "task_id": rec["task_id"], "name": names[rec["op"]], "worker": rec["worker"],
            "worker_name": [workers.get(w, f"worker {w}") for w in rec["worker"]],
            "layer": rec["layer"], "phase": np.array(PHASES, dtype=object)[rec["phase"]],
            "priority": rec["priority"], "step": 0})
        for col in ("submit_us", "ready_us", "acquire_us", "start_us", "end_us"):
            t[col] = rec[col] - self.t0
        t["duration_us"] = t["end_us"] - t["start_us"]
        t["flops"], t["bytes"] = rec["flops"], rec["bytes"]
        if self._marks:
            ends = np.array([m for m, _ in self._marks])
            t["step"] = np.searchsorted(ends, t["submit_us"].to_numpy(), side="right")
        self.tasks = t.reset_index(drop=True)
        nbuf = rec["nbuffers"]
        keep = np.arange(8)[None, :] < nbuf[:, None]
        self.accesses = pd.DataFrame({
            "task_id": np.repeat(rec["task_id"], nbuf),
            "handle": rec["handles"][keep], "mode": rec["modes"][keep]})

    def _step_table(self) -> pd.DataFrame:
        rows, prev = [], 0.0
        for i, (end, tokens) in enumerate(self._marks):
            mine = self.tasks[self.tasks["step"] == i]
            seconds = (end - prev) * 1e-6
            flops = float(mine["flops"].sum())
            rows.append({"step": i, "start_us": prev, "end_us": end, "seconds": seconds,
                         "tokens": tokens, "tasks": len(mine), "flops": flops,
                         "gflops": flops / seconds / 1e9 if seconds > 0 else np.nan,
                         "tokens_per_s": tokens / seconds if tokens and seconds > 0 else np.nan})
            prev = end
        return pd.DataFrame(rows, columns=["step", "start_us", "end_us", "seconds", "tokens",
                                           "tasks", "flops", "gflops", "tokens_per_s"])


def _struct_dtype(ctype) -> np.dtype:
    """The numpy dtype of a C struct, field offsets taken from the compiler's layout."""
    kinds = {"int": np.int32, "int64_t": np.int64, "uint64_t": np.uint64, "double": np.float64}
    names, formats, offsets = [], [], []
    for name, field in ctype.fields:
        t = field.type
        fmt = (kinds[t.item.cname], t.length) if t.kind == "array" else kinds[t.cname]
        names.append(name)
        formats.append(fmt)
        offsets.append(field.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ffi.sizeof(ctype)})


_RECORD_DTYPE = _struct_dtype(ffi.typeof("struct nl_task_record"))
_SAMPLE_DTYPE = _struct_dtype(ffi.typeof("struct nl_mem_sample"))


def drain_samples(keep: bool = False) -> np.ndarray:
    """The memory samples taken so far (``keep``: leave them for the next call)."""
    n = lib.nl_samples_count()
    buf = ffi.new("struct nl_mem_sample[]", max(n, 1))
    n = lib.nl_samples_drain(buf, n, int(keep))
    return np.frombuffer(ffi.buffer(buf, n * ffi.sizeof("struct nl_mem_sample")),
                         _SAMPLE_DTYPE).copy()


def _memory_table(samples: np.ndarray, t0: float) -> pd.DataFrame:
    names = _node_names()
    nodes = samples["node"]
    return pd.DataFrame({"t_us": samples["t_us"] - t0, "node": nodes,
                         "name": [names.get(int(n), f"node {n}") for n in nodes],
                         "used_bytes": samples["used"]})


def _node_names() -> dict[int, str]:
    names = {REGISTERED_NODE: "registered tiles"}
    buf = ffi.new("char[]", 64)
    for node in range(lib.starpu_memory_nodes_get_count()):
        lib.starpu_memory_node_get_name(node, buf, 64)
        names[node] = ffi.string(buf).decode()
    return names


def _worker_names(rt) -> dict[int, str]:
    if rt is None or not rt.alive:
        return {}
    buf = ffi.new("char[]", 64)
    out = {}
    for w in range(rt.nworkers):
        lib.starpu_worker_get_name(w, buf, 64)
        out[w] = ffi.string(buf).decode()
    return out


def _worker_table(nworkers: int) -> pd.DataFrame:
    s = ffi.new("struct nl_worker_stats *")
    buf = ffi.new("char[]", 64)
    rows = []
    for w in range(nworkers):
        lib.nl_worker_stats(w, s)
        lib.starpu_worker_get_name(w, buf, 64)
        rows.append({"worker": w, "name": ffi.string(buf).decode(), "total_us": s.total_us,
                     "executing_us": s.executing_us, "sleeping_us": s.sleeping_us,
                     "overhead_us": max(0.0, s.total_us - s.executing_us - s.sleeping_us),
                     "tasks": s.tasks, "flops": s.flops})
    return pd.DataFrame(rows)


def _bus_table() -> pd.DataFrame:
    s = ffi.new("struct nl_bus_stats *")
    names = _node_names()
    rows = []
    for b in range(lib.starpu_bus_get_count()):
        if lib.nl_bus_stats(b, s) == 0:
            rows.append({"bus": b, "src": names.get(s.src, str(s.src)),
                         "dst": names.get(s.dst, str(s.dst)), "bytes": s.bytes,
                         "transfers": s.count, "time_us": s.total_us})
    return pd.DataFrame(rows, columns=["bus", "src", "dst", "bytes", "transfers", "time_us"])


NODE_COLUMNS = ["node", "name", "kind", "capacity_bytes", "capped"]


def _node_table(rt) -> pd.DataFrame:
    """Each memory node StarPU accounts: its kind, what StarPU may allocate there, and
    whether that is a limit the runtime set (else the node's whole size)."""
    names = _node_names()
    capped = {"RAM": rt.memory_limit_mb is not None,
              "device": getattr(rt, "device_memory_limit_mb", None) is not None, "disk": True}
    rows = []
    for node in range(lib.starpu_memory_nodes_get_count()):
        total = lib.starpu_memory_get_total(node)
        if total < 0:
            continue
        kind = node_kind(names[node])
        rows.append({"node": node, "name": names[node], "kind": kind,
                     "capacity_bytes": int(total), "capped": bool(capped.get(kind, False))})
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


def _bound() -> dict:
    res, ires = ffi.new("double *"), ffi.new("double *")
    lib.starpu_bound_compute(res, ires, 0)
    if res[0] > 0:
        return {"bound_us": res[0] * 1e3,
                "note": "StarPU LP bound (history models, dependencies ignored)"}
    return {"bound_us": None,
            "note": "StarPU LP bound unavailable: the history performance models are not "
                    "calibrated for every (op, tile size) in the trace yet (StarPU needs about "
                    "10 executions of each); run more steps or set STARPU_CALIBRATE=1"}


def tensor_bytes(tensors) -> int:
    """Bytes of the tiles behind ``tensors``, each base tensor counted once (views
    share their base's tiles)."""
    seen, total = set(), 0
    for t in tensors:
        base = t.storage
        if id(base) not in seen:
            seen.add(id(base))
            total += sum(base.traits.tile_sizes) * base.dtype.itemsize
    return total


