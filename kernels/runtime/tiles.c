#include "internal.h"
#ifdef NL_HAVE_OPENCL
#include "../opencl/launch.h"
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* Whether a transfer of this tile to some node is pending (a prefetch, StarPU's
 * write-back of a dirty tile to the disk node). */
static int transfer_pending(starpu_data_handle_t h)
{
    unsigned nodes = starpu_memory_nodes_get_count();
    for (unsigned node = 0; node < nodes; node++) {
        int allocated = 0, valid = 0, requested = 0;
        starpu_data_query_status(h, (int)node, &allocated, &valid, &requested);
        if (requested) return 1;
    }
    return 0;
}

/* Runtime shutdown: unregister every tile still registered, now. Returns how
 * many blocks had tiles registered.
 * Unregistering a tile waits for its pending transfers. Out of core, a prefetch
 * into a full RAM waits for room that only the other tiles' unregistration makes
 * (they are dirty, and a prefetch does not evict), so unregistering that tile first
 * waited forever (seen in tests/runtime: stop() in starpu_data_unregister, workers
 * idle in their progress loop). So the tiles with nothing pending go first, freeing
 * their memory; then the rest, whose transfers now find room. */
int64_t nl_tiles_unregister_all(void)
{
    int64_t count = 0;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next) {
        int any = 0;
        for (int64_t i = 0; i < b->n; i++)
            if (b->h[i]) {
                any = 1;
                if (!transfer_pending(b->h[i])) nl_unregister_tiles(1, &b->h[i], 1);
            }
        count += any;
    }
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next)
        nl_unregister_tiles(b->n, b->h, 1);
    pthread_mutex_unlock(&tiles_lock);
    return count;
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
