#include "internal.h"
#ifdef NL_HAVE_OPENCL
#include "../opencl/launch.h"
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bytes of the tiles registered and not yet unregistered. */
int64_t nl_registered_bytes;

/* Bytes of tiles freed asynchronously since every task was last seen done: StarPU
 * releases them only after their tasks, so they still take memory. The memory
 * guard of Runtime counts them (a loop of create/free must not queue more tiles
 * than the memory limit holds: StarPU would spin forever) and waits for the
 * tasks when they matter. (Counting exactly, with an acquire callback per tile
 * before starpu_data_unregister_submit, delayed the release: RSS grew by 100+ MB
 * in the create/free stress test of tests/runtime/test_runtime.py.) */
int64_t nl_freed_pending_bytes;

/* ---- tiles ------------------------------------------------------------------
 * Each tile is a StarPU vector registered with home node -1: StarPU allocates it
 * on first write, so it can later be evicted to disk (out-of-core). Reading a
 * tile never written would trip a StarPU assertion (an abort); with this init
 * codelet it reads as zeros instead. */
static void zero_tile(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
           (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

#ifdef STARPU_USE_CUDA
/* on a CUDA worker: queued on its stream (the codelet is asynchronous) */
static void cuda_zero_tile(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    size_t bytes =
        (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]);
    cudaError_t err = cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0, bytes,
                                      starpu_cuda_get_local_stream());
    if (err != cudaSuccess)
        nl_error("CUDA: zeroing a fresh tile of %zu bytes failed: %s", bytes,
                 cudaGetErrorString(err));
}
#endif

/* StarPU runs it on the worker that first reads the tile: an OpenCL or CUDA one needs its
 * own */
static struct starpu_codelet zero_cl = {
    .cpu_funcs = {zero_tile},
#ifdef NL_HAVE_OPENCL
    .opencl_funcs = {nl_ocl_zero_tile},
#endif
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {cuda_zero_tile}, .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 1, .modes = {STARPU_W}, .name = "zero_init"};

void nl_register_tiles(int64_t n, const int64_t *nelems, size_t elemsize,
                       starpu_data_handle_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        starpu_vector_data_register(&out[i], -1, 0, (uint32_t)nelems[i], elemsize);
        __atomic_add_fetch(&nl_registered_bytes, nelems[i] * (int64_t)elemsize, __ATOMIC_RELAXED);
        starpu_data_set_reduction_methods(out[i], NULL, &zero_cl);
    }
}

/* Tiles freed lazily (starpu_data_unregister_submit) that StarPU has not destroyed yet,
 * counted by an unregister hook when `track_frees` is on (a runtime without StarPU-MPI,
 * which sets hooks of its own): out of core a freed tile can still have a transfer to or
 * from the disk node in flight, and stopping StarPU then aborts it
 * (_starpu_data_request_prio_list_deinit's assertion: a generation's KV cache and model
 * freed just before the runtime stopped, 2 runs in 5). The shutdown waits for them. */
void _starpu_data_set_unregister_hook(starpu_data_handle_t handle,
                                      void (*hook)(starpu_data_handle_t));
static int track_frees;
static int64_t frees_pending;

static void free_done(starpu_data_handle_t handle)
{
    (void)handle;
    __atomic_sub_fetch(&frees_pending, 1, __ATOMIC_RELEASE);
}

void nl_tiles_track_frees(int on)
{
    track_frees = on;
    __atomic_store_n(&frees_pending, 0, __ATOMIC_RELAXED);   /* none from an earlier StarPU */
}

/* sync = 0: unregister once the tasks using the tiles are done, without
 * waiting (the usual free); sync = 1: now, blocking (runtime shutdown: StarPU
 * must have no pending request left when it stops). */
void nl_unregister_tiles(int64_t n, starpu_data_handle_t *handles, int sync)
{
    for (int64_t i = 0; i < n; i++)
        if (handles[i]) {
            int64_t bytes = (int64_t)starpu_data_get_size(handles[i]);
            __atomic_sub_fetch(&nl_registered_bytes, bytes, __ATOMIC_RELAXED);
            if (sync) {
                starpu_data_unregister(handles[i]);
            } else {
                __atomic_add_fetch(&nl_freed_pending_bytes, bytes, __ATOMIC_RELAXED);
                if (track_frees) {   /* counted before its hook can fire */
                    __atomic_add_fetch(&frees_pending, 1, __ATOMIC_RELAXED);
                    _starpu_data_set_unregister_hook(handles[i], free_done);
                }
                starpu_data_unregister_submit(handles[i]);
            }
            handles[i] = NULL;
        }
}

/* ---- tile handle blocks -------------------------------------------------------
 * A tensor's handles live in a block allocated here and freed by a C function
 * that cffi calls when the Python array object is collected (ffi.gc): no Python
 * code runs there, so a Ctrl-C cannot cut a free in half or be swallowed by a
 * __del__. Live blocks form a ring, so that stopping a runtime unregisters every
 * tile still registered. A non-NULL handle in a block is always a live one. */
struct nl_tiles { struct nl_tiles *prev, *next; int64_t n; starpu_data_handle_t h[]; };
static struct nl_tiles live_tiles = {&live_tiles, &live_tiles, 0};
static pthread_mutex_t tiles_lock = PTHREAD_MUTEX_INITIALIZER;

static struct nl_tiles *block_of(starpu_data_handle_t *h)
{
    return (struct nl_tiles *)((char *)h - offsetof(struct nl_tiles, h));
}

starpu_data_handle_t *nl_tiles_new(int64_t n)
{
    struct nl_tiles *b = calloc(1, sizeof *b + (size_t)n * sizeof b->h[0]);
    if (!b) return NULL;
    b->n = n;
    pthread_mutex_lock(&tiles_lock);
    b->prev = live_tiles.prev;
    b->next = &live_tiles;
    live_tiles.prev->next = b;
    live_tiles.prev = b;
    pthread_mutex_unlock(&tiles_lock);
    return b->h;
}

/* The destructor: unregister what is still registered (once its tasks are done). */
void nl_tiles_release(starpu_data_handle_t *h)
{
    struct nl_tiles *b = block_of(h);
    pthread_mutex_lock(&tiles_lock);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    pthread_mutex_unlock(&tiles_lock);
    if (starpu_is_initialized()) nl_unregister_tiles(b->n, b->h, 0);
    free(b);
}

/* Runtime shutdown: unregister every tile still registered, now. Returns how
 * many blocks had tiles registered. (In memory; out of core see below.) */
int64_t nl_tiles_unregister_all(void)
{
    int64_t count = 0;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next) {
        int any = 0;
        for (int64_t i = 0; i < b->n; i++) any |= b->h[i] != NULL;
        count += any;
        nl_unregister_tiles(b->n, b->h, 1);
    }
    pthread_mutex_unlock(&tiles_lock);
    return count;
}

/* Runtime shutdown out of core. Unregistering a tile waits for its pending transfers,
 * and out of core those can wait for room that only other tiles' unregistration makes:
 * an idle fetch (StarPU's own write-backs, prefetches) into a RAM full of dirty tiles,
 * which such a request does not evict. Unregistering one tile at a time then waited
 * forever (seen: stop() in starpu_data_unregister, a worker retrying
 * _starpu_allocate_memory_on_node for an idle fetch of that very tile). So every tile is
 * unregistered at once, lazily (starpu_data_unregister_submit: each goes when its
 * transfers end, freeing room for the others' transfers), and this waits until StarPU
 * has destroyed them all — and the tiles freed lazily before — counted by the unregister
 * hook (above), or `timeout_s` passes. Returns how many tiles were still there (0: all
 * gone). StarPU 1.3 has no public "handle destroyed" notice; _starpu_data_set_unregister_hook
 * is exported by its library (StarPU-MPI uses it for its own handles, so this is not used
 * under StarPU-MPI, nor is the count: Runtime turns it on only without StarPU-MPI). */
int64_t nl_tiles_unregister_all_lazily(double timeout_s)
{
    int track = track_frees;
    track_frees = 1;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next)
        nl_unregister_tiles(b->n, b->h, 0);
    pthread_mutex_unlock(&tiles_lock);
    track_frees = track;
    struct timespec nap = {0, 1000000}, t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int64_t left = __atomic_load_n(&frees_pending, __ATOMIC_ACQUIRE);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (left <= 0 || (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec
                                                                       - t0.tv_nsec) > timeout_s)
            return left > 0 ? left : 0;
        nanosleep(&nap, NULL);
    }
}

/* How many tensors have tiles registered now. */
int64_t nl_tiles_live(void)
{
    int64_t count = 0;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next)
        for (int64_t i = 0; i < b->n; i++)
            if (b->h[i]) { count++; break; }
    pthread_mutex_unlock(&tiles_lock);
    return count;
}

/* Bytes of the tiles registered, plus those freed while tasks were pending. */
int64_t nl_held_bytes(void)
{
    return __atomic_load_n(&nl_registered_bytes, __ATOMIC_RELAXED)
           + __atomic_load_n(&nl_freed_pending_bytes, __ATOMIC_RELAXED);
}

/* ---- tiles handed to or taken from another library on a device (CuPy) --------------
 * TiledTensor.to_cupy holds each tile on the GPU's memory node (acquired there, so no task
 * writes it meanwhile) and gives its device pointer; from_cupy registers CuPy's buffers as
 * temporary handles on that node, copies them into ordinary tiles with tasks on the GPU,
 * and unregisters them, blocking, before CuPy may free them. */
int nl_tile_acquire_on_node(starpu_data_handle_t h, int node, int write)
{
    return starpu_data_acquire_on_node(h, node, write ? STARPU_RW : STARPU_R);
}

void nl_tile_release_on_node(starpu_data_handle_t h, int node)
{
    starpu_data_release_on_node(h, node);
}

uintptr_t nl_tile_pointer_on_node(starpu_data_handle_t h, int node)
{
    return (uintptr_t)starpu_data_handle_to_pointer(h, (unsigned)node);
}

int nl_node_devid(int node) { return starpu_memory_node_get_devid((unsigned)node); }

starpu_data_handle_t nl_register_on_node(int node, uintptr_t ptr, int64_t nelems,
                                         size_t elemsize)
{
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, node, ptr, (uint32_t)nelems, elemsize);
    return h;
}

void nl_unregister_now(starpu_data_handle_t h) { starpu_data_unregister(h); }
