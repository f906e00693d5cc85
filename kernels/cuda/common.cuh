/* Shared by the CUDA kernels (every .cu file here): the launch shapes and error text.
 *
 * Every host function nl_cu_<op> (its signature generated from the codelet table into
 * prototypes.h) queues its kernels on the stream StarPU gives the worker and returns
 * NULL, or the error text; the generated codelet says it through nl_error. They take the
 * C kernel's parameters and compute its formula (kernels/cpu/, the row's docstring in
 * kernels/codelets.py). Two shapes of kernel:
 *   element-wise   one thread per output value, a grid-stride loop (NL_CU_FOR);
 *   reductions     a block of NL_CU_RED threads cooperating on a few results, their
 *                  partial sums folded by a fixed tree in shared memory (below: nl_cu_geo).
 */
#pragma once
#include <stdint.h>
#include <stdio.h>
#ifdef NL_CU_EMULATE   /* the kernels run on the host, for tests without a GPU: emulate.h */
#include "emulate.h"
#else
#include <cuda_runtime.h>
#endif

#include "prototypes.h"

enum { NL_CU_THREADS = 256 };

/* blocks for n threads, capped (the grid-stride loops cover the rest) */
static inline unsigned nl_cu_blocks(int64_t n)
{
    int64_t b = (n + NL_CU_THREADS - 1) / NL_CU_THREADS;
    return (unsigned)(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b);
}

/* for (i = this thread; i < n; i += all threads) */
#define NL_CU_FOR(i, n)                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n); \
         i += (int64_t)blockDim.x * gridDim.x)

#ifndef NL_CU_EMULATE
/* queue kernel on the stream over `blocks` blocks of `threads` threads */
#define NL_CU_RUN(kernel, blocks, threads, stream, ...) \
    kernel<<<blocks, threads, 0, stream>>>(__VA_ARGS__)
/* queue a reduction kernel over geometry G: nl_cu_grid(G) blocks of NL_CU_RED threads */
#define NL_CU_RUN_COOP(kernel, G, stream, ...) \
    kernel<<<nl_cu_grid(G), NL_CU_RED, 0, stream>>>(__VA_ARGS__)
#endif

/* the last launch's error text, or NULL */
static inline const char *nl_cu_launched(void)
{
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? NULL : cudaGetErrorString(err);
}

/* launch kernel over n threads on the stream (nothing for n ≤ 0), and return the launch's
 * error text or NULL */
#define NL_CU_LAUNCH(kernel, n, stream, ...)                                            \
    do {                                                                                \
        if ((n) > 0) NL_CU_RUN(kernel, nl_cu_blocks(n), NL_CU_THREADS, stream, __VA_ARGS__); \
        return nl_cu_launched();                                                        \
    } while (0)

/* the larger of a and b, a NaN in either winning (as kernels/cpu/axis.h) */
__device__ static inline float nl_cu_max_nan(float a, float b)
{
    return (b > a || b != b) ? b : a;
}

/* Token ids (or labels) outside [0, vocab): the kernels skip them, so a bad one can never
 * index memory, and this check says so first, as the CPU kernel does. It finds the first
 * bad index (the smallest: a deterministic message) and waits for the stream, so it runs
 * only where the CPU kernel checks too (one task per token tile). Returns NULL, or the
 * CPU kernel's error text (msg, thread-local) naming the value and the valid range. */
static __device__ unsigned long long nl_cu_first_bad;

__global__ static void nl_cu_find_bad(int64_t n, int64_t vocab, const int64_t *ids)
{
    NL_CU_FOR(i, n)
        if (ids[i] < 0 || ids[i] >= vocab) atomicMin(&nl_cu_first_bad, (unsigned long long)i);
}

static inline const char *nl_cu_check_ids(cudaStream_t stream, const char *what,
                                          const char *plural, int64_t n, int64_t vocab,
                                          const int64_t *ids)
{
    static __thread char msg[256];
    unsigned long long none = ~0ull, first = ~0ull;
    cudaError_t err = cudaMemcpyToSymbolAsync(nl_cu_first_bad, &none, sizeof none, 0,
                                              cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess && n > 0) {
        NL_CU_RUN(nl_cu_find_bad, nl_cu_blocks(n), NL_CU_THREADS, stream, n, vocab, ids);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpyFromSymbolAsync(&first, nl_cu_first_bad, sizeof first, 0,
                                        cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    if (first == ~0ull) return NULL;
    long long bad = 0;
    err = cudaMemcpy(&bad, ids + first, sizeof bad, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    snprintf(msg, sizeof msg, "%s %lld is outside the vocabulary of %lld tokens (valid %s "
             "are 0..%lld)", what, bad, (long long)vocab, plural, (long long)vocab - 1);
    return msg;
}

/* ---- reductions ------------------------------------------------------------------------
 * A reduction computes `entries` results, each from `len` values (a sum in nl_acc, double,
 * or a max). A result gets `lanes` threads of a block (a power of two); a block of
 * NL_CU_RED threads holds per = NL_CU_RED / lanes results, thread t being
 *   contiguous (a result's values sit side by side: a row along the tile's last axis):
 *       result t / lanes, lane t % lanes — a result's lanes are neighbouring threads, lane
 *       q reading values q, q + lanes, …: a warp reads one contiguous stretch;
 *   else (neighbouring results sit side by side: sums down the columns of a tile):
 *       result t % per, lane t / per — neighbouring threads read neighbouring results'
 *       values: coalesced, each lane a strided part of its column.
 * The lanes' partial sums meet in shared memory and are folded by a fixed tree (lane q takes
 * lane q + w, w = lanes/2, …, 1; nl_cu_fold). Where a tile has too few results to fill the
 * GPU (fewer blocks than nl_cu_enough_blocks), the values are also cut into `split` chunks,
 * one block each: each writes its partial sums to the worker's workspace (nl_cu_workspace),
 * and a second kernel adds a result's chunks in order and stores it. Every order here (lanes,
 * tree, chunks) follows from the shape alone: the same results run to run and on every
 * GPU, without atomics. Against a one-thread loop in double, the sums differ only in the
 * order of their double additions: |error| ≤ (len/lanes/split + log2 lanes + split)·2⁻⁵³·
 * Σ|terms|, far below the float32 rounding of the stored result (2⁻²⁴ of it).
 *
 * The host emulation (emulate.h) runs a block as NL_CU_RED real threads with a barrier, on
 * small blocks, and lets a test choose nl_cu_enough_blocks, so that both paths (one block
 * per result, and chunks with the second kernel) run at test sizes. */
#ifdef NL_CU_EMULATE
enum { NL_CU_RED = 8, NL_CU_WARP = 4, NL_CU_PER_THREAD = 2, NL_CU_MIN_RUN = 2,
       NL_CU_MAX_GRID = 5 };
inline int64_t nl_cu_enough_blocks = 6;   /* set by nl_emu_set_enough_blocks (the test) */
#else
/* NL_CU_WARP results side by side (a warp's 128 bytes); a contiguous result gets one lane
 * per NL_CU_PER_THREAD values; chunks of at least NL_CU_MIN_RUN values a lane; the GPU is
 * filled by nl_cu_enough_blocks blocks (≈ 4 per SM of an H100/H200's 132: a constant, not
 * the device's count, so that the results do not depend on the GPU) */
enum { NL_CU_RED = 256, NL_CU_WARP = 32, NL_CU_PER_THREAD = 8, NL_CU_MIN_RUN = 16,
       NL_CU_MAX_GRID = 1 << 20 };
#define nl_cu_enough_blocks ((int64_t)512)
#endif
/* the workspace's partial sums (doubles): a chunked reduction uses entries·nsums·split of
 * them, so split is capped by it (1 MiB: tiles with few results hold few of them) */
enum { NL_CU_WS = 1 << 17 };

struct nl_cu_geo {
    int64_t entries, len;   /* results, and values per result */
    int32_t lanes, per;     /* threads per result, results per block */
    int32_t contiguous;     /* a result's lanes are neighbouring threads (see above) */
    int64_t split, chunk;   /* values cut in `split` chunks of `chunk` (1: one block each) */
    int64_t groups;         /* blocks' worth of work: ceil(entries / per) · split */
};

static inline int64_t nl_cu_pow2_at_least(int64_t v)
{
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}

/* The worker's workspace on its device: NL_CU_WS doubles, allocated at its first chunked
 * reduction and kept (the process's CUDA context frees it). A worker queues everything on
 * its one stream, so the kernels using it run one after another. Outside StarPU's memory
 * accounting (a cuda_memory_limit_mb cap): 1 MiB per CUDA worker. NULL without memory. */
inline double *nl_cu_workspace(void)
{
    static thread_local double *ws = NULL;
    static thread_local int failed = 0;
    if (!ws && !failed && cudaMalloc((void **)&ws, NL_CU_WS * sizeof(double)) != cudaSuccess) {
        (void)cudaGetLastError();   /* not this launch's error */
        ws = NULL;
        failed = 1;
    }
    return ws;
}

/* The geometry of `entries` reductions of `len` values each. ws: NULL for a kernel that
 * must finish in one block (it writes the tile after its sums), else where the workspace
 * goes when the reduction is chunked (no workspace: one block per result, slower only). */
static inline struct nl_cu_geo nl_cu_geometry(int64_t entries, int64_t len, int contiguous,
                                              int nsums, double **ws)
{
    struct nl_cu_geo G;
    G.entries = entries;
    G.len = len;
    G.contiguous = contiguous;
    int64_t lanes;
    if (contiguous) {
        lanes = nl_cu_pow2_at_least((len + NL_CU_PER_THREAD - 1) / NL_CU_PER_THREAD);
    } else {
        int64_t side = nl_cu_pow2_at_least(entries);
        lanes = NL_CU_RED / (side < NL_CU_WARP ? side : NL_CU_WARP);
    }
    G.lanes = (int32_t)(lanes < 1 ? 1 : lanes > NL_CU_RED ? NL_CU_RED : lanes);
    G.per = NL_CU_RED / G.lanes;
    const int64_t blocks = (entries + G.per - 1) / G.per;
    int64_t split = 1;
    if (ws && len > 0 && entries > 0 && blocks < nl_cu_enough_blocks) {
        const int64_t run = (int64_t)G.lanes * NL_CU_MIN_RUN;
        const int64_t room = NL_CU_WS / (entries * nsums);
        split = (nl_cu_enough_blocks + blocks - 1) / blocks;
        if (split > (len + run - 1) / run) split = (len + run - 1) / run;
        if (split > room) split = room;
        if (split > 1 && !(*ws = nl_cu_workspace())) split = 1;
    }
    G.chunk = split > 1 ? (len + split - 1) / split : len;
    G.split = split > 1 ? (len + G.chunk - 1) / G.chunk : 1;
    G.groups = blocks * G.split;
    return G;
}

static inline unsigned nl_cu_grid(struct nl_cu_geo G)
{
    return (unsigned)(G.groups < NL_CU_MAX_GRID ? G.groups : NL_CU_MAX_GRID);
}

/* this thread's result within its block, and its lane */
__device__ static inline int nl_cu_result(struct nl_cu_geo G)
{
    return G.contiguous ? (int)threadIdx.x / G.lanes : (int)threadIdx.x % G.per;
}

__device__ static inline int nl_cu_lane(struct nl_cu_geo G)
{
    return G.contiguous ? (int)threadIdx.x % G.lanes : (int)threadIdx.x / G.per;
}

/* where the values of group g's chunk end (the chunk starts at g % split · chunk) */
__device__ static inline int64_t nl_cu_chunk_end(struct nl_cu_geo G, int64_t s)
{
    const int64_t end = (s + 1) * G.chunk;
    return end < G.len ? end : G.len;
}

enum { NL_CU_SUM, NL_CU_MAX_NAN, NL_CU_FMAX };

/* red[v·NL_CU_RED + q·per + r]: lane q's partial result v (of nsums) of the block's result
 * r, folded into lane 0's by the fixed tree; every thread of the block calls it (it waits
 * for them). OP: NL_CU_SUM, NL_CU_MAX_NAN (a NaN wins, as max_slice), NL_CU_FMAX (a NaN
 * loses, as fmaxf) */
template <int OP, typename T>
__device__ static inline void nl_cu_fold(T *red, int nsums, struct nl_cu_geo G, int q, int r)
{
    __syncthreads();
    for (int w = G.lanes / 2; w > 0; w /= 2) {
        if (q < w)
            for (int v = 0; v < nsums; v++) {
                T *a = red + v * NL_CU_RED + q * G.per + r;
                const T b = a[w * G.per];
                if constexpr (OP == NL_CU_SUM) *a += b;
                else if constexpr (OP == NL_CU_FMAX) *a = fmaxf(*a, b);
                else *a = nl_cu_max_nan(*a, b);
            }
        __syncthreads();
    }
}
