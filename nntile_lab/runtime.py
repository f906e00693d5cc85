"""The StarPU runtime as a Python context: workers, scheduler, memory limit,
disk node, profiling. StarPU allows one live runtime per process; a new one can
start once the previous one stopped (scheduler sweeps do exactly that)."""
from __future__ import annotations

import contextlib
import os
import sys

from nntile_lab._lib import ffi, lib
from nntile_lab.errors import UsageError, described
from nntile_lab.interrupts import check_stop, deferred_interrupts
from nntile_lab.parallel.mpi import attach
from nntile_lab.shutdown import run_hooks as run_shutdown_hooks
from nntile_lab.spec import DEFAULTS, parse_hints  # the runtime's defaults are the spec's (one set)
from nntile_lab.watchdog import Watchdog

PHASES = ("none", "forward", "backward", "optimizer")


class TaskError(RuntimeError):
    """A kernel met bad data inside a task (the message says which and why)."""


class CudaUnavailable(ValueError):
    """CUDA asked of an installation that cannot give it (a StarPU built without CUDA, no
    GPU, no CuPy): the message names what is missing and the fix."""


NO_CUDA_STARPU = ("this StarPU has no CUDA (Debian's StarPU 1.3 is built without it): build "
                  "it with scripts/build_starpu_cuda.sh PREFIX, then rebuild nntile_lab "
                  "against it (STARPU_PREFIX=PREFIX; docs/accelerators.md, \"CUDA\")")


class OutOfMemory(MemoryError):
    """The tiles a runtime would have to hold exceed its memory limit (plus its disk
    node): StarPU would spin forever looking for memory, so this is raised instead."""


def heteroprio_levels() -> int:
    """Priority levels heteroprio keeps apart (kernels/runtime/heteroprio.c): StarPU's
    heteroprio takes a priority as a bucket index, so each class of task (CPU only, CPU
    or OpenCL, OpenCL only) has this many buckets; higher priorities share the top one."""
    return lib.nl_heteroprio_levels()


# How long one C-level wait may block before Python gets control back to run its
# signal handlers (Ctrl-C / Jupyter's "interrupt kernel" → KeyboardInterrupt).
POLL_MS = 50
MIB = 1 << 20
# how long stop() waits for the tiles' last transfers before stopping StarPU anyway
STOP_TILES_TIMEOUT_S = 120.0


# Why a runtime with OpenCL workers takes no disk node (checked on PoCL, 2026-11-25)
OPENCL_WITH_DISK = ("a disk node under an OpenCL device's memory (tiles moving device → RAM "
                    "→ disk) livelocks StarPU 1.3.10 (a 2-layer GPT-2 under a 16 MiB device "
                    "cap and a 40 MiB RAM cap stopped in its second step); give RAM room for "
                    "the whole step (memory_limit_mb above the planned peak, or None) so "
                    "that RAM is the device's overflow, or leave out the OpenCL workers to "
                    "train out of core")


# Workers asleep while the calling thread submits a burst of small tasks (a decode step,
# Runtime.workers_asleep): Debian's StarPU 1.3 has non-blocking drivers, so an idle worker
# spins on its core, and with as many workers as cores the submitting thread shares a core
# with a spinning worker. True while the workers are paused by such a block.
_asleep = False


def _wake() -> None:
    global _asleep
    if _asleep:
        _asleep = False
        lib.starpu_resume()


def wait_interruptibly(step, draining: bool = False) -> None:
    """Call ``step(POLL_MS)`` (a C wait with a timeout: 1 done, 0 timed out, < 0
    errno) until it reports done; a KeyboardInterrupt can land between calls, and a stop
    request of the thread's long action (``interrupts.stoppable``: a Stop button, a
    kernel interrupt that reached another thread) is raised there as ``Stopped``. The
    running runtime's watchdog turns a stall into OutOfMemory (``draining``: into
    memory lent to the queued tasks only, while the runtime stops)."""
    rt = Runtime.active
    dog = getattr(rt, "_watchdog", None)
    if dog is not None:
        dog.arm()
    while True:
        check_stop()           # also before a wait that returns at once (small steps)
        ret = step(0 if _asleep else POLL_MS)
        if ret > 0:
            return
        if ret < 0:
            raise RuntimeError(f"waiting for StarPU tasks failed: {os.strerror(-ret)}")
        if _asleep:            # only the workers can end this wait: wake them
            _wake()
            continue
        if dog is not None:
            dog.poll(draining)


def scheduler_names() -> list[str]:
    """The scheduling policies this StarPU build knows."""
    names = ffi.new("const char *[]", 64)
    return sorted(ffi.string(names[i]).decode() for i in range(lib.nl_sched_policies(names, 64)))


def opencl_devices(accelerators_only: bool = False) -> int:
    """OpenCL devices this machine shows (``clinfo -l`` lists them): GPUs and accelerators
    only, or every kind (PoCL's device on the CPU too). 0 in a build without OpenCL."""
    return lib.nl_opencl_devices(int(accelerators_only))


def cuda_devices() -> int:
    """CUDA devices the driver shows (``nvidia-smi -L`` lists them); 0 with a StarPU built
    without CUDA (Debian's), whatever the machine has."""
    return lib.nl_cuda_devices()


WHERE = {"any": 0, "cpu": lib.STARPU_CPU, "opencl": lib.STARPU_OPENCL, "cuda": lib.STARPU_CUDA}


def device_tasks_in_flight(kind: str = "opencl") -> int:
    """How many tasks' tiles an accelerator worker (``kind`` "opencl" or "cuda") may hold on
    its device at once: StarPU submits ``STARPU_OPENCL_PIPELINE`` / ``STARPU_CUDA_PIPELINE``
    tasks ahead (default 2 for both) and fetches their tiles while one runs. A task needing
    the whole cap then livelocks (checked on PoCL: 16 MiB of tiles under a 16 MiB cap hung,
    under 32 MiB it ran), so each task must fit in cap / this."""
    try:
        return max(1, int(os.environ.get(f"STARPU_{kind.upper()}_PIPELINE", "2")))
    except ValueError:
        return 2


def opencl_tasks_in_flight() -> int:
    """``device_tasks_in_flight("opencl")``."""
    return device_tasks_in_flight("opencl")


def check_scheduler(name: str) -> None:
    """UsageError (a ValueError) naming --scheduler when this StarPU build has no such
    policy (the commands check it with their other options, before any work: exit 2)."""
    names = scheduler_names()
    if name not in names:
        raise UsageError(f"scheduler={name!r} (--scheduler) is unknown; valid ones: "
                         f"{', '.join(names)}")


def max_workers() -> int:
    """CPU workers this StarPU build can run (Debian's is built with 4)."""
    return lib.STARPU_MAXCPUS


class Runtime:
    """A running StarPU: ``with Runtime(scheduler="dmda", ncpu=2) as rt: ...``.

    Settings given here take precedence over ``STARPU_*`` environment variables.
    ``memory_limit_mb`` caps the RAM StarPU allocates for tiles; with ``ooc_dir``
    tiles beyond it are evicted to a disk node in that directory (out-of-core).
    ``ooc_backend``: "o_direct" (default: evicted tiles bypass the page cache, so
    the cap is honest) or "unistd" (buffered). ``disk_traffic()`` counts the bytes.
    ``hints``: the memory hints (``nntile_lab.spec.HINTS``, a comma set) the model and
    optimizer give StarPU; they never change a result, only traffic and peaks.
    ``priorities``: models tag their tasks with priorities from the task graph
    (``nntile_lab.nn.priorities``); prio, lws, dmdas and dmdasd honour them, eager, ws
    and dm/dmda ignore them; under heteroprio a task's priority picks its bucket within
    the class of workers that can run it (``heteroprio_levels``; docs/accelerators.md).
    None (the default): on. Measured on 2 cores with lws, they
    cut a step by 4.5 % (main job) and 5.6 % (E 1024): the head's dx chain over the
    vocabulary no longer waits behind weight-gradient products.
    ``stall_timeout_s``: with a memory limit, a wait in which no task ends for this
    long while every memory node is full raises OutOfMemory instead of waiting forever
    (``nntile_lab.watchdog``); None turns the watchdog off.
    ``buffer_cache_mb``: in memory, freed tile buffers (of ≥ 256 KiB) are kept, up to
    this many MiB, for the next tile of the same size (None: a quarter of the machine's
    RAM; 0: off) — a model frees its temporaries every step and fresh pages fault on
    first touch. Off out of core, where the cap bounds the process.
    ``nopencl``: OpenCL workers (one per device; a GPU's, or PoCL's device on the CPU when
    there is no GPU), each with its own memory node, capped at ``opencl_memory_limit_mb``
    MiB (None: the device's memory). ``with rt.on("opencl"):`` runs the tasks submitted
    inside on them only (docs/accelerators.md).
    ``ncuda``: CUDA workers, one per GPU, each with its own memory node; needs a StarPU
    built with CUDA (scripts/build_starpu_cuda.sh; Debian's has none: ``CudaUnavailable``).
    ``with rt.on("cuda"):`` confines tasks to them. ``cuda_memory_limit_mb`` caps what
    StarPU allocates on each GPU (StarPU's ``STARPU_LIMIT_CUDA_MEM``; None: 90 % of the
    GPU's memory, StarPU's default): tiles beyond it are evicted to RAM, the paper's "small
    GPU, RAM as its overflow".
    """

    OOC_BACKENDS = ("o_direct", "unistd")

    active: Runtime | None = None   # the running runtime (StarPU allows one per process)
    _generations = 0   # runs started in this process (StarPU's handles die with a run)

    def __init__(self, scheduler: str = DEFAULTS.scheduler, ncpu: int | None = DEFAULTS.ncpu,
                 memory_limit_mb: int | None = DEFAULTS.memory_limit_mb,
                 ooc_dir: str | None = DEFAULTS.ooc_dir,
                 ooc_size_mb: int = DEFAULTS.ooc_size_mb, profiling: bool = False,
                 ooc_backend: str = "o_direct", priorities: bool | None = DEFAULTS.priorities,
                 hints: str | None = DEFAULTS.hints, buffer_cache_mb: int | None = None,
                 nopencl: int = 0, opencl_memory_limit_mb: int | None = None,
                 ncuda: int = 0, cuda_memory_limit_mb: int | None = None,
                 stall_timeout_s: float | None = 30.0):
        valid = scheduler_names()
        if scheduler not in valid:
            raise ValueError(f"unknown scheduler {scheduler!r}; valid ones: {', '.join(valid)}")
        cap = max_workers()
        if ncpu is None:
            ncpu = min(os.cpu_count() or 1, cap)
        if not isinstance(ncpu, int) or isinstance(ncpu, bool) or not 1 <= ncpu <= cap:
            raise ValueError(f"ncpu={ncpu!r} must be an integer from 1 to {cap} (this StarPU "
                             f"build's STARPU_MAXCPUS; rebuild StarPU with "
                             f"--enable-maxcpus=N for more)")
        if memory_limit_mb is not None and not _is_mib(memory_limit_mb):
            raise ValueError(f"memory_limit_mb={memory_limit_mb!r} must be an integer from 16 "
                             f"to {MAX_MIB:,} (MiB), or None for no limit")
        if ooc_dir is not None and memory_limit_mb is None:
            raise ValueError(f"ooc_dir={ooc_dir!r} needs memory_limit_mb: StarPU evicts tiles "
                             "to disk only when RAM use reaches that limit")
        if ooc_dir is not None and not _is_mib(ooc_size_mb):
            raise ValueError(f"ooc_size_mb={ooc_size_mb!r} must be an integer from 16 to "
                             f"{MAX_MIB:,} (MiB)")
        if ooc_backend not in self.OOC_BACKENDS:
            raise ValueError(f"ooc_backend={ooc_backend!r} is not one of {self.OOC_BACKENDS}")
        self._opencl_env = _opencl_env(nopencl, opencl_memory_limit_mb)
        if nopencl and ooc_dir is not None:
            raise ValueError(f"ooc_dir={ooc_dir!r} with nopencl={nopencl}: {OPENCL_WITH_DISK}")
        _check_cuda_limit(ncuda, cuda_memory_limit_mb)
        if ncuda and nopencl and scheduler == "heteroprio":
            raise ValueError(f"scheduler='heteroprio' with nopencl={nopencl} and ncuda={ncuda}: "
                             "its bucket layout (kernels/runtime/heteroprio.c) has one class "
                             "for one kind of accelerator; give OpenCL or CUDA workers, not "
                             "both, or use dmda, dmdas, eager or lws")
        _check_ncuda(ncuda)
        if nopencl and scheduler in CPU_AND_CUDA_ONLY:
            raise ValueError(f"scheduler={scheduler!r} with nopencl={nopencl}: "
                             f"{CPU_AND_CUDA_ONLY[scheduler]}")
        if buffer_cache_mb is not None and (not isinstance(buffer_cache_mb, int)
                                            or isinstance(buffer_cache_mb, bool)
                                            or buffer_cache_mb < 0):
            raise ValueError(f"buffer_cache_mb={buffer_cache_mb!r} must be an integer ≥ 0 "
                             "(MiB; 0 turns the cache off), or None for a quarter of RAM")
        if stall_timeout_s is not None and (isinstance(stall_timeout_s, bool)
                                            or not isinstance(stall_timeout_s, (int, float))
                                            or not 0 < stall_timeout_s < float("inf")):
            raise ValueError(f"stall_timeout_s={stall_timeout_s!r} must be a number of "
                             "seconds > 0, or None to turn the stall watchdog off")
        self.stall_timeout_s = stall_timeout_s
        if memory_limit_mb is not None:
            buffer_cache_mb = 0
        elif buffer_cache_mb is None:
            buffer_cache_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 22
        self.buffer_cache_mb = buffer_cache_mb
        self.ooc_backend = ooc_backend
        self.hints = self._hints = parse_hints(hints, out_of_core=memory_limit_mb is not None)
        self.priorities = True if priorities is None else bool(priorities)
        self.scheduler, self.ncpu = scheduler, ncpu
        self.nopencl, self.opencl_memory_limit_mb = nopencl, opencl_memory_limit_mb
        self.ncuda, self.cuda_memory_limit_mb = ncuda, cuda_memory_limit_mb
        self.memory_limit_mb, self.ooc_dir, self.ooc_size_mb = memory_limit_mb, ooc_dir, ooc_size_mb
        self.profiling = profiling
        self.alive = False
        self._with_blocks = 0        # `with` blocks using it: never replaced under them
        self.generation = 0          # bumped at each start: tensors of a past run are stale
        self.start()

    # ---- life cycle --------------------------------------------------------
    def start(self) -> Runtime:
        if Runtime.active is not None:
            self._replace_in_notebook(Runtime.active)
        if self.ooc_dir is not None:
            _check_ooc_dir(self.ooc_dir)
        if self.memory_limit_mb is not None:   # freed tiles go back to the system
            lib.nl_malloc_fixed_threshold(64 << 10)
        env = {"STARPU_LIMIT_CPU_MEM": None if self.memory_limit_mb is None
               else str(self.memory_limit_mb),
               "STARPU_DISK_SWAP": None, "STARPU_SILENT": os.environ.get("STARPU_SILENT", "1"),
               "STARPU_LIMIT_CUDA_MEM": None if self.cuda_memory_limit_mb is None
               else str(self.cuda_memory_limit_mb),
               **self._opencl_env}
        saved = {k: os.environ.get(k) for k in env}
        with deferred_interrupts():   # StarPU up and the runtime marked so, or neither
            lib.nl_buffer_cache(self.buffer_cache_mb << 20)   # before StarPU allocates
            try:
                _set_env(env)
                ret = lib.nl_init(self.scheduler.encode(), self.ncpu, self.nopencl,
                                  self.ncuda, int(self.profiling))
            finally:
                _set_env(saved)
            if ret:
                lib.nl_buffer_cache(0)
                raise RuntimeError(f"starpu_init failed with code {ret} ({os.strerror(-ret)})"
                                   + (f"{self._take_error()}" if self.nopencl else ""))
            Runtime.active = self
            self.alive = True
            Runtime._generations += 1
            self.generation = Runtime._generations
        self.mpi = None   # StarPU-MPI under mpirun (nntile_lab.parallel.mpi)
        self._where, self._fallback = "any", None
        got = lib.starpu_opencl_worker_get_count()
        if got != self.nopencl:   # StarPU only warns when it finds fewer devices
            self.stop()
            raise RuntimeError(f"nopencl={self.nopencl} but StarPU started {got} OpenCL "
                               "workers: check `clinfo -l` and STARPU_OPENCL_* variables")
        got = lib.starpu_cuda_worker_get_count()
        if got != self.ncuda:   # likewise for CUDA devices (busy, hidden, out of memory)
            self.stop()
            raise RuntimeError(f"ncuda={self.ncuda} but StarPU started {got} CUDA workers: "
                               "check `nvidia-smi -L` and CUDA_VISIBLE_DEVICES")
        try:
            self.mpi = attach()
        except BaseException:
            self.stop()
            raise
        # the memory hints are for one process out of core: under StarPU-MPI a rank would
        # hint (and invalidate) tiles it does not own
        self.hints = self._hints if self.mpi is None else frozenset()
        # tiles freed lazily are counted until StarPU destroys them, so that stop() waits
        # for them out of core (kernels/runtime/tiles.c; StarPU-MPI hooks handles itself)
        lib.nl_tiles_track_frees(int(self.mpi is None))
        lib.nl_disk_counters(ffi.NULL, 1)
        # a task whose tiles together exceed the RAM limit is refused at submission
        # (StarPU would wait forever); under StarPU-MPI a rank submits only its share
        lib.nl_set_task_bytes_limit(
            self.memory_limit_mb << 20 if self.memory_limit_mb and self.mpi is None else 0)
        # and a task that may run on an accelerator, whose tiles together exceed the
        # device's limit (StarPU would evict and retry forever)
        lib.nl_set_device_task_limit(
            self.device_memory_bytes() // device_tasks_in_flight(self.device_kind)
            if self.device_kind else 0)
        # tiles + the working sets in flight must leave room to move tiles between RAM
        # and the disk node (kernels/runtime/guard.c); the watchdog catches what slips
        # through
        # (in RAM alone, tiles that fill the limit exactly still run: no reserve there)
        guarded = self.mpi is None and self.memory_limit_mb is not None
        self._ooc_reserve = guarded and self.ooc_dir is not None
        lib.nl_guard_set(self.capacity_bytes() if self._ooc_reserve else 0, self.ncpu)
        self._watchdog = (Watchdog(self, self.stall_timeout_s, OutOfMemory) if guarded
                          else None)
        if self.ooc_dir is not None:
            self._ooc_buf = ffi.new("char[]", os.fsencode(self.ooc_dir))
            node = lib.nl_disk_register_backend(self._ooc_buf, self.ooc_size_mb << 20,
                                                int(self.ooc_backend == "o_direct"))
            if node < 0:
                self.stop()
                raise RuntimeError(f"could not register disk node in {self.ooc_dir!r}: "
                                   f"{os.strerror(-node)}")
        return self

    def stop(self) -> None:
        """Wait for all tasks, free every tile still registered, shut StarPU down.

        The wait for the tasks can be interrupted (Ctrl-C): the runtime is then
        left running, whole, and ``stop()`` can be called again."""
        if not self.alive:
            return
        mpi = getattr(self, "mpi", None)
        if mpi is not None:
            mpi.wait_for_all()
        wait_interruptibly(lib.nl_wait_all, draining=True)
        with deferred_interrupts():   # StarPU down and the runtime marked so, or neither
            try:
                lib.nl_sampler_stop()   # a Trace left recording must not poll a stopped StarPU
                # StarPU's accounting exact again before the tiles go (guard.c says why)
                lib.nl_guard_repay()
                self._unregister_all_tiles()
                if mpi is not None:
                    mpi.shutdown()
                    self.mpi = None
                run_shutdown_hooks()   # what must survive an abort in starpu_shutdown
                lib.nl_fini()   # the OpenCL programs, then StarPU
                lib.nl_buffer_cache(0)   # the kept buffers go back to the system
            finally:
                self.alive = False
                Runtime.active = None
            self.raise_task_error()
            self._raise_stall()

    def _unregister_all_tiles(self) -> None:
        """Free every tile still registered. With a memory cap, all at once and lazily:
        one at a time, a tile's pending transfer into a full node could wait forever for
        the room the later tiles held (kernels/runtime/tiles.c)."""
        if self.mpi is not None or (self.memory_limit_mb is None
                                    and not self.opencl_memory_limit_mb
                                    and not self.cuda_memory_limit_mb):
            lib.nl_tiles_unregister_all()
            return
        left = lib.nl_tiles_unregister_all_lazily(STOP_TILES_TIMEOUT_S)
        if left:
            print(f"nntile_lab: {left} tile(s) still had transfers pending "
                  f"{STOP_TILES_TIMEOUT_S:g} s after the runtime began to stop; stopping "
                  "StarPU anyway", file=sys.stderr)

    def _replace_in_notebook(self, old: Runtime) -> None:
        """StarPU allows one runtime per process. In a Jupyter/IPython kernel re-running
        the set-up cell is the normal thing to do: the running one (unless a `with` block
        holds it) finishes its tasks and stops, and a line says so. Elsewhere a second
        runtime is a mistake: an error says how to stop the first."""
        interactive = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
        if interactive is None or old._with_blocks:
            raise RuntimeError(f"a runtime is already running ({old!r}); StarPU allows one "
                               "per process: stop it (rt.stop() or leave its `with` block) "
                               "before starting another")
        failed = ""
        try:
            old.stop()
        except TaskError as exc:      # the old run's failure: said, not in the new one's way
            failed = f" (one of its tasks had failed: {exc})"
        workers = f"{old.ncpu} worker{'s' if old.ncpu > 1 else ''}"
        print(f"nntile_lab: stopped the runtime that was running ({old.scheduler}, {workers}) "
              f"after its tasks finished{failed}: StarPU allows one per process; tensors "
              "made under it cannot be used in this one")

    def __enter__(self) -> Runtime:
        self._with_blocks += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._with_blocks -= 1
        if exc is not None and getattr(self, "mpi", None) is not None:
            self.mpi.abort(exc)   # the other ranks wait for this one: never stop politely
        if exc is None:
            self.stop()
            return
        # the block's own exception wins: a TaskError pending from its tasks is
        # attached to it (context and note) rather than replacing it. A second
        # Ctrl-C during this wait leaves the runtime running, whole: rt.stop() again.
        try:
            self.stop()
        except (TaskError, OutOfMemory) as pending:
            if pending is exc:
                return
            if exc.__context__ is None:
                exc.__context__ = pending
            what = "a task had failed" if isinstance(pending, TaskError) else "StarPU stalled"
            exc.add_note(f"({what} too: {pending})")

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        opencl = f", nopencl={self.nopencl}" if self.nopencl else ""
        opencl += f", ncuda={self.ncuda}" if self.ncuda else ""
        return f"Runtime(scheduler={self.scheduler!r}, ncpu={self.ncpu}{opencl}, {state})"

    @classmethod
    def current(cls) -> Runtime:
        if cls.active is None:
            raise RuntimeError("no nntile_lab runtime is running: start one with "
                               "`with nntile_lab.Runtime() as rt:`")
        return cls.active

    # ---- work --------------------------------------------------------------
    def wait(self) -> None:
        """Block until every submitted task finished; raise TaskError if one failed."""
        self.check_alive()
        if self.mpi is not None:
            self.mpi.wait_for_all()
        wait_interruptibly(lib.nl_wait_all)
        self.raise_task_error()
        self._raise_stall()

    @contextlib.contextmanager
    def workers_asleep(self):
        """The workers sleep (``starpu_pause``: tasks queue) while the block submits, and
        wake at its end: for a burst of tiny tasks from Python (a decode step), whose
        submitting thread would otherwise share its core with a spinning idle worker
        (StarPU 1.3's drivers poll) and submit at a fraction of its speed. A wait inside
        the block that the queued tasks must end wakes them first. Only for CPU workers
        in memory on one process: a disk node, an accelerator or StarPU-MPI moves data
        through the workers, which a blocking call in the block could wait for."""
        global _asleep
        if (_asleep or self.memory_limit_mb is not None or self.nopencl or self.ncuda
                or self.mpi is not None or not self.alive):
            yield self
            return
        lib.starpu_pause()
        _asleep = True
        try:
            yield self
        finally:
            _wake()

    @contextlib.contextmanager
    def scope(self, *, layer: int | None = None, phase: str | None = None,
              priority: int | None = None):
        """Tag tasks submitted inside with a layer, a phase and a priority."""
        prev = self._scope
        new = (prev[0] if priority is None else priority,
               prev[1] if layer is None else layer,
               prev[2] if phase is None else _phase_id(phase))
        lib.nl_set_scope(*new)
        self._scope = new
        try:
            yield self
        finally:
            lib.nl_set_scope(*prev)
            self._scope = prev

    _scope = (0, -1, 0)

    @contextlib.contextmanager
    def on(self, kind: str, fallback: str | None = None):
        """Run the tasks submitted inside on one kind of worker only: "cpu", "opencl"
        (needs ``nopencl`` ≥ 1), "cuda" (``ncuda`` ≥ 1) or "any" (the scheduler's choice,
        the default). An op with no implementation for that kind raises
        ``NoImplementation`` before its task, unless ``fallback`` names where such ops run
        instead ("cpu", "opencl", "cuda" or "any"): ``on("opencl", fallback="cpu")`` puts
        every op the device can run on the device and the rest on the CPU workers."""
        self.check_alive()
        if kind not in WHERE:
            raise ValueError(f"on({kind!r}): the kind is one of {', '.join(WHERE)}")
        if fallback is not None and fallback not in WHERE:
            raise ValueError(f"on({kind!r}, fallback={fallback!r}): the fallback is None or "
                             f"one of {', '.join(WHERE)}")
        if fallback is not None and (kind == "any" or fallback == kind):
            raise ValueError(f"on({kind!r}, fallback={fallback!r}): a fallback is for ops "
                             f"that cannot run on the kind asked for; give a kind other "
                             f"than 'any' and a different fallback")
        if "opencl" in (kind, fallback) and not self.nopencl:
            raise ValueError("on('opencl') needs OpenCL workers: start the runtime with "
                             "Runtime(nopencl=1)")
        if "cuda" in (kind, fallback) and not self.ncuda:
            raise ValueError("on('cuda') needs CUDA workers: start the runtime with "
                             "Runtime(ncuda=1)")
        prev = (self._where, self._fallback)
        self._set_where(kind, fallback)
        try:
            yield self
        finally:
            self._set_where(*prev)

    _fallback: str | None = None

    def _set_where(self, kind: str, fallback: str | None) -> None:
        lib.nl_set_where(WHERE[kind])
        if fallback is not None:
            lib.nl_set_where_fallback(WHERE[fallback])
        self._where, self._fallback = kind, fallback

    @property
    def where(self) -> str:
        """The kind of worker tasks are confined to now (``on``): "any", "cpu", "opencl" or
        "cuda"."""
        return self._where

    @property
    def fallback(self) -> str | None:
        """Where ops that cannot run on ``where`` go now (``on(kind, fallback)``); None:
        such an op raises ``NoImplementation``."""
        return self._fallback

    def cuda_memory_node(self) -> int:
        """The memory node of the first CUDA worker (its GPU's memory)."""
        self.check_alive()
        node = lib.nl_cuda_memory_node()
        if node < 0:
            raise CudaUnavailable(f"{self!r} has no CUDA worker: start it with ncuda=1"
                                  + ("" if lib.nl_cuda_built() else f" ({NO_CUDA_STARPU})"))
        return node

    def opencl_memory_node(self) -> int:
        """The memory node of the first OpenCL worker (its device's memory)."""
        self.check_alive()
        node = lib.nl_opencl_memory_node()
        if node < 0:
            raise RuntimeError(f"{self!r} has no OpenCL worker: start it with nopencl=1")
        return node

    @property
    def device_kind(self) -> str | None:
        """The accelerator whose memory ``device_memory_bytes`` reports: "opencl" with
        OpenCL workers, else "cuda" with CUDA workers, else None."""
        return "opencl" if self.nopencl else "cuda" if self.ncuda else None

    @property
    def device_memory_limit_mb(self) -> int | None:
        """The cap set on that accelerator (``opencl_memory_limit_mb`` or
        ``cuda_memory_limit_mb``), None when uncapped or without one."""
        return {"opencl": self.opencl_memory_limit_mb,
                "cuda": self.cuda_memory_limit_mb}.get(self.device_kind)

    def device_memory_bytes(self) -> int:
        """What StarPU may allocate on the first accelerator (``device_kind``; its memory
        node's size: the cap when one is set, else the device's memory)."""
        node = (self.opencl_memory_node() if self.device_kind == "opencl"
                else self.cuda_memory_node())
        return lib.starpu_memory_get_total(node)

    def _take_error(self) -> str:
        buf = ffi.new("char[]", 4096)
        return f": {ffi.string(buf).decode()}" if lib.nl_take_error(buf, 4096) else ""

    @property
    def nworkers(self) -> int:
        self.check_alive()
        return lib.starpu_worker_get_count()

    def memory_used(self, node: int = 0) -> int:
        """Bytes StarPU has allocated on a memory node (0: RAM). Needs memory_limit_mb."""
        self.check_alive()
        return lib.starpu_memory_get_total(node) - lib.starpu_memory_get_available(node)

    def disk_traffic(self, reset: bool = False) -> dict:
        """Bytes (and calls) the disk node read and wrote since the runtime started or
        the last ``reset``; all zero without ``ooc_dir``."""
        out = ffi.new("int64_t[4]")
        lib.nl_disk_counters(out, int(reset))
        return dict(zip(("bytes_read", "bytes_written", "reads", "writes"), out))

    def bus_traffic(self) -> list[dict]:
        """Data moved per bus since the last call (or the start): one dict per bus that
        moved any, each a direction between two memory nodes (src, dst: StarPU's node
        names, e.g. "NUMA 0" → "OpenCL 0"), with bytes and transfers. StarPU counts only
        while profiling is on (``Runtime(profiling=True)``, or a running Trace)."""
        self.check_alive()
        s, name = ffi.new("struct nl_bus_stats *"), ffi.new("char[]", 64)

        def node(n):
            lib.starpu_memory_node_get_name(n, name, 64)
            return ffi.string(name).decode()
        out = []
        for bus in range(lib.starpu_bus_get_count()):
            if lib.nl_bus_stats(bus, s) == 0 and s.bytes > 0:
                out.append({"src": node(s.src), "dst": node(s.dst), "bytes": int(s.bytes),
                            "transfers": int(s.count)})
        return out

    def buffer_cache(self) -> dict:
        """The tile-buffer cache (``buffer_cache_mb``): allocations of ≥ 256 KiB served
        from it (``hits``) and not (``misses``), and the bytes it keeps now."""
        out = ffi.new("int64_t[3]")
        lib.nl_buffer_cache_stats(out)
        return dict(zip(("hits", "misses", "kept_bytes"), out))

    def check_alive(self) -> None:
        if not self.alive:
            raise RuntimeError(f"{self!r} has stopped: start a new Runtime and create the "
                               "tensors again")

    @property
    def ntensors(self) -> int:
        """How many tensors have tiles registered now (views not counted)."""
        return lib.nl_tiles_live()

    def capacity_bytes(self) -> int | None:
        """What the tiles may occupy: the RAM limit plus the disk node; None if unlimited."""
        if self.memory_limit_mb is None:
            return None
        disk = self.ooc_size_mb if self.ooc_dir is not None else 0
        return (self.memory_limit_mb + disk) << 20

    def reserve(self, nbytes: int, tile_bytes: int, what) -> None:
        """Account ``nbytes`` of new tiles (the largest ``tile_bytes``); raise
        OutOfMemory if they cannot fit. ``what`` names them: a string, or a function
        making it (called only for an error: a decode step makes ~70 tensors).

        Tiles registered and not yet released (freed ones wait for their tasks) are
        all data StarPU must keep somewhere; beyond the RAM limit (and the disk node)
        it would wait forever for memory. Near the cap this first waits for the tasks
        (so that freed tiles are released); it raises only if they still do not fit.
        A task needs its tiles in RAM, so one tile must fit under the RAM limit."""
        mib = 1 << 20
        if self.memory_limit_mb is not None and tile_bytes > self.memory_limit_mb * mib:
            raise OutOfMemory(
                f"{described(what)} has tiles of {tile_bytes / mib:.1f} MiB, more than "
                f"memory_limit_mb={self.memory_limit_mb}: a task needs its tiles in RAM. "
                f"Use smaller tiles or raise memory_limit_mb above {-(-tile_bytes // mib)}")
        dog = getattr(self, "_watchdog", None)
        if dog is not None and dog.error is not None:
            raise OutOfMemory(f"{described(what)} was refused: this runtime stalled earlier "
                              "(see the OutOfMemory raised then); stop it and start a new one "
                              "with more room")
        # under StarPU-MPI every rank registers every tile but allocates only those it
        # owns or receives: the total says nothing there
        cap = None if getattr(self, "mpi", None) is not None else self.capacity_bytes()
        if cap is None:
            return
        ooc = getattr(self, "_ooc_reserve", False)
        keep = lib.nl_guard_reserve(0) if ooc else 0   # room for the tasks in flight
        if self.tile_bytes + nbytes + keep > cap:
            wait_interruptibly(lib.nl_wait_all)
            keep = lib.nl_guard_reserve(0) if ooc else 0
        if self.tile_bytes + nbytes + keep > cap:
            raise self._capacity_error(described(what), self.tile_bytes, nbytes, keep)

    @property
    def tile_bytes(self) -> int:
        """Bytes of the tiles registered, plus those freed since the tasks were last all
        done (StarPU releases a freed tile after its tasks); views are not counted."""
        self.check_alive()
        return lib.nl_held_bytes()

    def _raise_stall(self) -> None:
        dog = getattr(self, "_watchdog", None)
        if dog is not None and dog.error is not None:
            raise dog.error

    def guard_refusal(self) -> OutOfMemory:
        """The task the memory guard refused (kernels/runtime/guard.c) as an error."""
        task, live = ffi.new("int64_t *"), ffi.new("int64_t *")
        op = lib.nl_guard_refused(task, live)
        name = ffi.string(lib.nl_op_name(op)).decode() if op >= 0 else "a"
        if task[0] < 0:
            return OutOfMemory(f"a {name} task was refused: this runtime stalled earlier "
                               "(see the OutOfMemory raised then); stop it and start a new "
                               "one with more room")
        return self._capacity_error(f"a {name} task (working set {task[0] / MIB:.2f} MiB)",
                                    live[0], 0, lib.nl_guard_reserve(task[0]))

    def _capacity_error(self, what: str, held: int, nbytes: int, reserve: int) -> OutOfMemory:
        where = (f"memory_limit_mb={self.memory_limit_mb} + ooc_size_mb={self.ooc_size_mb} "
                 f"(disk node in {self.ooc_dir!r})" if self.ooc_dir is not None
                 else f"memory_limit_mb={self.memory_limit_mb} and no disk node")
        need = -(-(held + nbytes + reserve) // MIB)
        fix = (f"raise ooc_size_mb to at least {need - self.memory_limit_mb}"
               if self.ooc_dir is not None else
               f"raise memory_limit_mb to at least {need}, or give ooc_dir= (a disk "
               f"node, with ooc_size_mb ≥ {max(16, need - self.memory_limit_mb)}) so tiles "
               "can be evicted to disk")
        kept = (f" and {reserve / MIB:.2f} MiB kept free for the tasks in flight (workers + 1 "
                "working sets of the largest task, so that tiles can move between RAM and "
                "disk)" if reserve else "")
        return OutOfMemory(
            f"{what} needs {nbytes / MIB:.1f} MiB of new tiles; with the {held / MIB:.1f} MiB "
            f"already held{kept} that is {need} MiB, more than {where} allow: {fix}, or free "
            "tensors you no longer need")

    def raise_task_error(self) -> None:
        buf = ffi.new("char[]", 512)
        if lib.nl_take_error(buf, 512):
            raise TaskError(ffi.string(buf).decode(errors="replace"))


def _phase_id(phase: str) -> int:
    try:
        return PHASES.index(phase)
    except ValueError:
        raise ValueError(f"unknown phase {phase!r}; valid ones: {', '.join(PHASES)}") from None


def _check_ooc_dir(path: str) -> None:
    """The disk node's directory must be (or become) a writable directory."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"ooc_dir={path!r} is a file, not a directory: give a directory "
                         "for the out-of-core disk node (it is created if missing)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"ooc_dir={path!r} cannot be created ({exc.strerror}): give a "
                         "writable directory for the out-of-core disk node") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"ooc_dir={path!r} is not writable: give a writable directory for "
                         "the out-of-core disk node")


# StarPU reads its memory limits (STARPU_LIMIT_*_MEM, MiB) as a C int: 2**32 + 16 wrapped
# to a 16 MiB cap. The largest it takes (2 PiB) is far above any machine's memory.
MAX_MIB = 2**31 - 1


# Policies that never hand a task to an OpenCL worker: a task placed there
# (rt.on("opencl"), or an op only the device runs) waits forever
CPU_AND_CUDA_ONLY = {
    "modular-gemm": "StarPU's modular-gemm schedules onto CPU and CUDA workers only: a task "
                    "placed on the OpenCL device (rt.on('opencl')) would wait forever (a "
                    "GEMM under on('opencl', fallback='cpu') hung); use dmda, dmdas, "
                    "heteroprio, eager or lws with OpenCL workers",
}


def _is_mib(value) -> bool:
    """A memory size in MiB StarPU takes: an integer from 16 to ``MAX_MIB``."""
    return isinstance(value, int) and not isinstance(value, bool) and 16 <= value <= MAX_MIB


def _opencl_env(nopencl, limit_mb) -> dict:
    """The STARPU_* variables an OpenCL runtime starts under, after checking the request
    against the devices present (StarPU itself only warns and starts fewer workers)."""
    if not isinstance(nopencl, int) or isinstance(nopencl, bool) or nopencl < 0:
        raise ValueError(f"nopencl={nopencl!r} must be an integer ≥ 0 (OpenCL workers)")
    if limit_mb is not None and (not _is_mib(limit_mb) or not nopencl):
        raise ValueError(f"opencl_memory_limit_mb={limit_mb!r} must be an integer from 16 to "
                         f"{MAX_MIB:,} (MiB) with nopencl ≥ 1, or None for the device's whole "
                         "memory")
    # StarPU uses GPUs and accelerators only, unless told to take CPU devices (PoCL) too.
    # It enumerates the devices once per process, at its first start (with nopencl=0
    # too), so the choice must not depend on nopencl: CPU devices exactly when the
    # machine has no other
    built = lib.nl_opencl_built()
    accelerators = opencl_devices(accelerators_only=True) if built else 0
    env = {"STARPU_LIMIT_OPENCL_MEM": None if limit_mb is None else str(limit_mb),
           "STARPU_OPENCL_ON_CPUS": "1" if built and not accelerators else None,
           "STARPU_OPENCL_ONLY_ON_CPUS": None}
    if not nopencl:
        return env
    if not built:
        raise ValueError(f"nopencl={nopencl}: this build of nntile_lab has no OpenCL worker "
                         "(its OpenCL/CLBlast headers were missing): run scripts/setup.sh, "
                         "then rebuild")
    usable = accelerators or opencl_devices()
    what = "GPU or accelerator" if accelerators else "OpenCL"
    cap = min(lib.STARPU_MAXOPENCLDEVS, usable)
    if nopencl > cap:
        raise ValueError(f"nopencl={nopencl} but this machine has {usable} {what} "
                         f"device(s) (`clinfo -l` lists them; StarPU takes at most "
                         f"{lib.STARPU_MAXOPENCLDEVS}): ask for at most {cap}, or install a "
                         "driver (Debian: pocl-opencl-icd gives a device on the CPU)")
    return env


def _check_cuda_limit(ncuda, limit_mb) -> None:
    """cuda_memory_limit_mb: a whole number of MiB StarPU takes (``_is_mib``) with CUDA
    workers, or None."""
    if limit_mb is not None and (not _is_mib(limit_mb) or not ncuda):
        raise ValueError(f"cuda_memory_limit_mb={limit_mb!r} must be an integer from 16 to "
                         f"{MAX_MIB:,} (MiB) with ncuda ≥ 1, or None for the GPU's memory "
                         "(StarPU takes 90 % of it)")


def _check_ncuda(ncuda) -> None:
    """ncuda against this StarPU and the GPUs present, before StarPU starts (it would only
    warn and start fewer workers, or none)."""
    if not isinstance(ncuda, int) or isinstance(ncuda, bool) or ncuda < 0:
        raise ValueError(f"ncuda={ncuda!r} must be an integer ≥ 0 (CUDA workers, one per GPU)")
    if not ncuda:
        return
    if not lib.nl_cuda_built():
        raise CudaUnavailable(f"ncuda={ncuda}: {NO_CUDA_STARPU}")
    found = cuda_devices()
    cap = min(lib.STARPU_MAXCUDADEVS, found)
    if ncuda > cap:
        fix = (f"ask for at most {cap}" if cap else "check the NVIDIA driver and "
               "CUDA_VISIBLE_DEVICES")
        raise CudaUnavailable(f"ncuda={ncuda} but this machine shows {found} CUDA device(s) "
                              f"(`nvidia-smi -L` lists them; StarPU takes at most "
                              f"{lib.STARPU_MAXCUDADEVS}): {fix}")


def _set_env(values: dict) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
