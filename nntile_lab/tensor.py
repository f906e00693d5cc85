"""Tiled tensors: a grid of tiles, one StarPU handle each.

Python sees numpy C order. Inside a tile, values are stored in C order of the
tile's own shape, so a tile of shape (m, k, n) is a contiguous row-major block
and the kernels view it as 2-D/3-D matrices without copies.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from nntile_lab._lib import ffi, lib
from nntile_lab.runtime import NO_CUDA_STARPU, CudaUnavailable, Runtime, wait_interruptibly
from nntile_lab.tiling import TensorTraits

# bfloat16: ml_dtypes' numpy dtype (the one JAX uses); its tiles hold 2-byte bf16 values,
# made by ops.to_bf16 and read by the bf16 ops (ops/precision.py, ops.gemm)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float32), np.dtype(np.int64), BFLOAT16)
MAX_NDIM = 16   # nl_tile_copy's index array


class TiledTensor:
    """A tensor split into tiles, each a StarPU data handle allocated by StarPU
    (home node -1, so it can be evicted to disk). Free it with ``free()``, a
    ``with`` block, or by dropping the last reference."""

    _base = None  # set on views: the tensor that owns the tiles
    dropped = False  # invalidate()d: no valid contents until the next full write
    owners = None     # owner rank of each tile under StarPU-MPI (nntile_lab.parallel.mpi)
    replicated = False  # under StarPU-MPI: every rank owns its own copy

    def __init__(self, traits: TensorTraits, dtype=np.float32, runtime: Runtime | None = None):
        self.dtype = _check_dtype(dtype)
        self.traits = traits
        self.runtime = runtime or Runtime.current()
        self.runtime.check_alive()
        if traits.ndim > MAX_NDIM:
            raise ValueError(f"shape {traits.shape} has {traits.ndim} dimensions; tensors "
                             f"have at most {MAX_NDIM}")
        self._generation = self.runtime.generation
        n = traits.ntiles
        # freed by C when the last reference (the tensor's, a view's) goes: a Ctrl-C
        # cannot cut that free in half as it could a __del__
        handles = lib.nl_tiles_new(n)
        if handles == ffi.NULL:
            raise MemoryError(f"no memory for the {n} tile handles of {traits}")
        handles = ffi.gc(handles, lib.nl_tiles_release)
        size = self.dtype.itemsize
        sizes = _c_tile_sizes(traits)
        self.runtime.reserve(
            traits.size * size, sizes[0] * size,   # the first tile is the largest
            lambda: f"a {self.dtype.name} tensor of shape {traits.shape} with tiles "
                    f"{traits.tile_shape}")
        lib.nl_register_tiles(n, sizes, size, handles)
        self._handles = handles
        if getattr(self.runtime, "mpi", None) is not None:
            self.runtime.mpi.register(self)

    shape = property(lambda self: self.traits.shape)
    tile_shape = property(lambda self: self.traits.tile_shape)
    grid_shape = property(lambda self: self.traits.grid_shape)
    ndim = property(lambda self: self.traits.ndim)
    ntiles = property(lambda self: self.traits.ntiles)

    @property
    def handles(self):
        """The tiles' StarPU handles, flat in C order of the grid (checked alive: a
        freed tensor, a view of one, or a tensor of a stopped runtime raises)."""
        if not self.runtime.alive or self._generation != self.runtime.generation:
            when = "was stopped" if not self.runtime.alive else "was stopped and restarted"
            raise RuntimeError(f"{self!r} belongs to a runtime that {when} "
                               f"({self.runtime!r}): its tiles are gone; create the tensor "
                               "again in the running runtime")
        if self._base is not None:
            try:
                _ = self._base.handles
            except RuntimeError as exc:
                raise RuntimeError(f"{self!r} is a view of a tensor that was freed or whose "
                                   f"runtime stopped ({exc})") from None
        if self._handles is None:
            raise RuntimeError(f"{self!r} was freed: create it again")
        return self._handles

    @staticmethod
    def _wait_ready(handles, n: int, write: bool) -> None:
        """Wait, interruptibly (Ctrl-C), until ``n`` tiles can be read (or written)."""
        group = lib.nl_ready_start(n, handles, int(write))
        if group == ffi.NULL:
            raise MemoryError("out of memory waiting for tiles")
        try:
            wait_interruptibly(lambda ms: lib.nl_ready_wait(group, ms))
        finally:
            lib.nl_ready_drop(group)

    def _copy_tiles(self, array: np.ndarray, to_tiles: bool, only=None, row0: int = 0) -> None:
        """Copy every tile (``only``: those where it is true) from/to ``array``. Each
        tile's acquire, copy and release happen in one C call, so an interrupt never
        leaves a tile acquired."""
        handles = self.handles
        tiles = [i for i in range(self.traits.ntiles) if only is None or only[i]]
        self._wait_ready(handles if only is None else
                         ffi.new("starpu_data_handle_t[]", [handles[i] for i in tiles]),
                         len(tiles), to_tiles)
        t, size = self.traits, self.dtype.itemsize
        strides = ffi.new("int64_t[]", array.strides)
        base = ffi.cast("char *", array.ctypes.data)
        for i in tiles:
            off = sum(o * s for o, s in zip(t.tile_offsets[i], array.strides))
            if row0:   # ``array`` holds the rows from row0 on
                off -= row0 * array.strides[0]
            _check(lib.nl_tile_copy(handles[i], int(to_tiles), base + off, t.ndim,
                                    ffi.new("int64_t[]", t.tile_shapes[i]), strides, size),
                   "acquire")

    def to_numpy(self) -> np.ndarray:
        """Wait for the tasks writing this tensor and gather it into a numpy array."""
        if self.storage.dropped:
            raise RuntimeError(f"{self!r} was invalidated (its contents were dropped): write "
                               "it (ops.fill, copy_from_numpy) before reading it")
        out = np.empty(self.shape, self.dtype)
        mpi = getattr(self.runtime, "mpi", None)
        if mpi is not None:   # every rank gets every tile from its owner
            mpi.gather(self)
        self._copy_tiles(out, to_tiles=False)
        if mpi is not None:
            mpi.flush(self)
        self.runtime.raise_task_error()
        return out

    def to_cupy(self, write: bool = False) -> CupyTiles:
        """The tiles as CuPy arrays in the GPU's memory, without a copy through the host::

            with x.to_cupy() as tiles:      # one cupy.ndarray per tile, grid order
                total = sum(float(t.sum()) for t in tiles)

        Each tile is brought to the first CUDA worker's memory node (moved there by StarPU
        if it is elsewhere) and held there until the block ends: read-only, or read-write
        with ``write=True`` (tasks submitted later see the changes). Tasks that would write
        a held tile wait for the block's end. Needs a StarPU built with CUDA,
        ``Runtime(ncuda ≥ 1)`` and CuPy (``CudaUnavailable`` says which is missing)."""
        if self.storage.dropped:
            raise RuntimeError(f"{self!r} was invalidated (its contents were dropped): write "
                               "it before handing it to CuPy")
        cupy, node = _cupy_and_node("to_cupy")
        if self.dtype == BFLOAT16:
            raise TypeError(f"to_cupy: {self!r} holds bfloat16, which CuPy has no dtype for: "
                            "convert it with nl.ops.to_f32 first")
        return CupyTiles(self, cupy, node, bool(write))

    def copy_from_numpy(self, array: np.ndarray) -> TiledTensor:
        """Overwrite every tile from ``array`` (same shape and dtype)."""
        array = _check_array(array)
        if array.shape != self.shape or array.dtype != self.dtype:
            raise ValueError(f"array of shape {array.shape} and dtype {array.dtype} does not "
                             f"match the tensor's {self.shape}, {self.dtype}")
        self._copy_tiles(array, to_tiles=True, only=self._owned_tiles())
        self.storage.dropped = False
        return self

    # ---- memory hints (out of core: less disk traffic, a lower peak) ----------------
    def invalidate(self) -> TiledTensor:
        """Drop the contents once the tasks submitted so far that use them are done
        (``starpu_data_invalidate_submit``): the tiles' memory is freed and never
        written to disk. The next access must be a full write (``ops.fill``, an op's
        ``out`` written in W mode, ``copy_from_numpy``): a task reading a tile with no
        valid copy makes StarPU abort, or (these tiles have a zero-init codelet) read
        zeros — a silent wrong answer; ``to_numpy`` raises until the next write."""
        lib.nl_hint_tiles(self.ntiles, self.handles, 0)
        self.storage.dropped = True
        return self

    def wont_use(self, after: TiledTensor | None = None) -> TiledTensor:
        """Not needed soon (``starpu_data_wont_use``, once the tasks submitted so far
        that use it are done): evicted first when RAM is short, and pushed to the disk
        node in idle time so that the eviction costs no write. ``after``: only once
        the tasks writing ``after`` are done."""
        return self._hint(1, after)

    def prefetch(self, after: TiledTensor | None = None) -> TiledTensor:
        """Bring the tiles into RAM asynchronously, now or (``after``) once the tasks
        submitted so far that write ``after``'s last tile are done, i.e. when the
        stage before the one that reads this tensor ends."""
        return self._hint(2, after)

    def _hint(self, kind: int, after: TiledTensor | None) -> TiledTensor:
        if self.storage.dropped:
            return self
        if after is None:
            lib.nl_hint_tiles(self.ntiles, self.handles, kind)
        else:
            _check(-lib.nl_hint_after(after.handles[after.ntiles - 1], self.ntiles,
                                      self.handles, kind), "acquire_cb")
        return self

    def copy_rows_from_numpy(self, array: np.ndarray, row0: int = 0) -> TiledTensor:
        """Overwrite the tiles of rows ``row0 … row0 + len(array)`` (axis 0) from
        ``array``: whole tile bands, so that a tensor larger than memory can be written
        band by band."""
        array = _check_array(array)
        t = self.traits
        r1, band = row0 + array.shape[0], t.tile_shape[0]
        if (array.shape[1:] != self.shape[1:] or array.dtype != self.dtype or row0 % band
                or not 0 <= row0 < r1 <= self.shape[0] or (r1 % band and r1 != self.shape[0])):
            raise ValueError(f"array of shape {array.shape} and dtype {array.dtype} at row "
                             f"{row0} is not a whole number of tile bands (rows of {band}) "
                             f"of the tensor's {self.shape}, {self.dtype}")
        only = [row0 <= off[0] < r1 for off in t.tile_offsets]
        owned = self._owned_tiles()
        if owned is not None:
            only = [a and b for a, b in zip(only, owned)]
        self._copy_tiles(array, to_tiles=True, only=only, row0=row0)
        return self

    def _owned_tiles(self):
        """Under StarPU-MPI: which tiles this rank owns; None on a single process."""
        owners = self.storage.owners
        if getattr(self.runtime, "mpi", None) is None or owners is None:
            return None
        return [o == self.runtime.mpi.rank for o in owners]

    def split_axis(self, axis: int, inner: int) -> TiledTensor:
        """A view with dimension ``axis`` (size s, tile t) split into (s/inner, inner),
        tiles (t/inner, inner): the same tiles, same memory (e.g. E → heads × head size)."""
        return self._view(self.traits.split_axis(axis, inner))

    def merge_axes(self, axis: int) -> TiledTensor:
        """A view with dimensions ``axis`` and ``axis + 1`` merged; the second must be
        a single tile (then every tile keeps its memory layout)."""
        return self._view(self.traits.merge_axes(axis))

    def _view(self, traits: TensorTraits) -> TiledTensor:
        view = object.__new__(TiledTensor)
        view.dtype, view.runtime = self.dtype, self.runtime
        view.traits = traits
        view._handles, view._base = self.handles, self   # the base owns and frees the tiles
        view._generation = self._generation
        return view

    @property
    def storage(self) -> TiledTensor:
        """The tensor that owns the tiles: itself, or the base of a view (of a view…)."""
        t = self
        while t._base is not None:
            t = t._base
        return t

    def free(self, *, wait: bool = False) -> None:
        """Unregister the tiles once the tasks using them are done (``wait``: now,
        blocking); idempotent. Views of it become unusable (they raise)."""
        if (self._handles is not None and self.runtime.alive and self._base is None
                and self._generation == self.runtime.generation):
            lib.nl_unregister_tiles(self.traits.ntiles, self._handles, int(wait))
        self._handles = None

    def __enter__(self) -> TiledTensor:
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __repr__(self) -> str:
        return (f"TiledTensor(shape={self.shape}, tile_shape={self.tile_shape}, "
                f"dtype={self.dtype.name})")


def empty(shape, tile_shape=None, dtype=np.float32) -> TiledTensor:
    """A tensor whose tiles StarPU allocates on first write."""
    return TiledTensor(TensorTraits(shape, tile_shape), dtype)


def empty_like(x: TiledTensor, dtype=None) -> TiledTensor:
    return TiledTensor(x.traits, x.dtype if dtype is None else dtype, x.runtime)


def from_numpy(array: np.ndarray, tile_shape=None) -> TiledTensor:
    """Split a C-contiguous float32 or int64 array into tiles."""
    array = _check_array(array)
    return empty(array.shape, tile_shape, array.dtype).copy_from_numpy(array)


class CupyTiles:
    """``TiledTensor.to_cupy()``: a ``with`` block holding the tensor's tiles on the GPU's
    memory node; ``as`` gives the list of CuPy arrays (one per tile, C order of the grid, each
    of its tile's shape), valid inside the block only."""

    def __init__(self, tensor: TiledTensor, cupy, node: int, write: bool):
        self.tensor, self._cupy, self.node, self.write = tensor, cupy, node, write
        self._held = []

    def __enter__(self) -> list:
        t, cupy, node = self.tensor, self._cupy, self.node
        handles = t.handles
        device = lib.nl_node_devid(node)
        arrays = []
        try:
            for i in range(t.ntiles):
                ret = lib.nl_tile_acquire_on_node(handles[i], node, int(self.write))
                if ret:
                    raise RuntimeError(f"to_cupy: StarPU could not hold tile {i} of {t!r} on "
                                       f"node {node} (code {ret})")
                self._held.append(handles[i])
                shape = t.traits.tile_slices(i)
                shape = tuple(sl.stop - sl.start for sl in shape)
                nbytes = math.prod(shape) * t.dtype.itemsize
                mem = cupy.cuda.UnownedMemory(lib.nl_tile_pointer_on_node(handles[i], node),
                                              nbytes, self, device)
                arrays.append(cupy.ndarray(shape, t.dtype, cupy.cuda.MemoryPointer(mem, 0)))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        t.runtime.raise_task_error()
        return arrays

    def __exit__(self, *exc) -> None:
        # CuPy's own work on the arrays must be done before StarPU may move or free them
        if self._held:
            self._cupy.cuda.Device(lib.nl_node_devid(self.node)).synchronize()
        while self._held:
            lib.nl_tile_release_on_node(self._held.pop(), self.node)


def from_cupy(array, tile_shape=None) -> TiledTensor:
    """A tensor made from a CuPy array on the GPU of the runtime's first CUDA worker, without
    a copy through the host: each tile's part of the array is registered as a StarPU handle
    on that GPU's memory node and copied, by a task on the GPU, into an ordinary tile (which
    StarPU may later move or evict like any other); the array may be freed afterwards.
    float32 or int64. Needs what ``to_cupy`` needs."""
    cupy, node = _cupy_and_node("from_cupy")
    if not isinstance(array, cupy.ndarray):
        raise TypeError(f"from_cupy: a cupy.ndarray is needed, got {type(array).__name__} "
                        "(nl.from_numpy takes numpy arrays)")
    dtype = np.dtype(array.dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.int64)):
        raise TypeError(f"from_cupy: dtype {dtype} is not float32 or int64: convert it with "
                        "array.astype(cupy.float32) first")
    device = lib.nl_node_devid(node)
    if array.device.id != device:
        raise ValueError(f"from_cupy: the array is on GPU {array.device.id}, the runtime's "
                         f"CUDA worker on GPU {device}: move it with cupy.asarray under "
                         f"cupy.cuda.Device({device})")
    out = empty(array.shape, tile_shape, dtype)
    rt = out.runtime
    submit = lib.nl_submit_copy if dtype == np.float32 else lib.nl_submit_copy_i64
    temporaries, parts = [], []
    try:
        with rt.on("cuda"):
            for i in range(out.ntiles):
                part = cupy.ascontiguousarray(array[out.traits.tile_slices(i)])
                parts.append(part)   # alive until its handle is unregistered below
                h = lib.nl_register_on_node(node, part.data.ptr, part.size, dtype.itemsize)
                temporaries.append(h)
                ret = submit(h, out.handles[i], part.size)
                if ret:
                    raise RuntimeError(f"from_cupy: the copy of tile {i} was refused "
                                       f"(code {ret})")
    finally:
        for h in temporaries:   # blocking: waits for the copies reading them
            lib.nl_unregister_now(h)
    rt.raise_task_error()
    return out


def _cupy_and_node(what: str):
    """(the cupy module, the first CUDA worker's memory node), or CudaUnavailable naming
    every missing piece and its fix."""
    rt = Runtime.active
    missing = []
    if not lib.nl_cuda_built():
        missing.append(NO_CUDA_STARPU)
    elif rt is None or not rt.alive:
        missing.append("no runtime is running: start one with Runtime(ncuda=1)")
    elif not rt.ncuda:
        missing.append(f"{rt!r} has no CUDA worker: start it with Runtime(ncuda=1)")
    try:
        import cupy
    except ImportError:
        cupy = None
        missing.append("CuPy is not installed: pip install cupy-cuda13x (cupy-cuda12x for a "
                       "CUDA 12 driver)")
    if missing:
        raise CudaUnavailable(f"{what} hands tiles in GPU memory to CuPy, but "
                              + "; and ".join(missing))
    return cupy, rt.cuda_memory_node()


def _check(ret: int, what: str) -> None:
    if ret:
        raise RuntimeError(f"starpu_data_{what} failed with code {ret}")


# Each tensor layout's tile sizes as a C array, made once (a decode step makes ~70
# tensors of a few layouts); the layout is kept beside it (its id stays its own)
_C_SIZES: dict = {}
_KNOWN_DTYPES = {**{d: d for d in DTYPES}, **{d.type: d for d in DTYPES}}


def _c_tile_sizes(traits: TensorTraits):
    hit = _C_SIZES.get(id(traits))
    if hit is None or hit[0] is not traits:
        if len(_C_SIZES) >= 4096:
            _C_SIZES.clear()
        hit = _C_SIZES[id(traits)] = (traits, ffi.new("int64_t[]", traits.tile_sizes))
    return hit[1]


def _check_dtype(dtype) -> np.dtype:
    try:
        return _KNOWN_DTYPES[dtype]       # the usual ones, without building a dtype
    except (KeyError, TypeError):
        pass
    dt = np.dtype(dtype)
    if dt not in DTYPES:
        raise TypeError(f"dtype {dt} is not supported: use float32 for values, int64 for "
                        "token ids or ml_dtypes.bfloat16 for bf16 values (convert with "
                        "array.astype(np.float32))")
    return dt


def _check_array(array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy array, got {type(array).__name__}: "
                        "wrap it with np.asarray(...)")
    _check_dtype(array.dtype)
    if not array.flags.c_contiguous:
        raise ValueError(f"array of shape {array.shape} is not C-contiguous: "
                         "pass np.ascontiguousarray(array)")
    return array
