/* Shared by the CUDA kernels (every .cu file here): the launch shape and error text.
 *
 * Every host function nl_cu_<op> (its signature generated from the codelet table into
 * prototypes.h) queues its kernels on the stream StarPU gives the worker and returns
 * NULL, or the error text; the generated codelet says it through nl_error. The kernels
 * are plain: one thread per output value (or per reduced fiber), a grid-stride loop,
 * sums in double in the CPU kernel's order along the axis where one thread owns a fiber.
 * They take the C kernel's parameters and compute its formula (kernels/cpu/, the row's
 * docstring in kernels/codelets.py). */
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

/* blocks for one block per item of n, capped as above */
static inline unsigned nl_cu_cap_blocks(int64_t n)
{
    return (unsigned)(n < 1 ? 1 : n > (1 << 20) ? (1 << 20) : n);
}

/* The sum of v over the block's threads, for every one of them: a tree in shared memory
 * (red: NL_CU_THREADS values, free again on return). A fixed order: reproducible. */
__device__ static inline double nl_cu_block_sum(double *red, double v)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    double total = red[0];
    __syncthreads();
    return total;
}

/* for (i = this thread; i < n; i += all threads) */
#define NL_CU_FOR(i, n)                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n); \
         i += (int64_t)blockDim.x * gridDim.x)

#ifndef NL_CU_EMULATE
/* queue kernel on the stream over `blocks` blocks of `threads` threads */
#define NL_CU_RUN(kernel, blocks, threads, stream, ...) \
    kernel<<<blocks, threads, 0, stream>>>(__VA_ARGS__)
/* queue a kernel whose one block of NL_CU_THREADS threads cooperates (shared memory) */
#define NL_CU_RUN_BLOCK(kernel, stream, ...) \
    kernel<<<1, NL_CU_THREADS, 0, stream>>>(__VA_ARGS__)
/* the same over `blocks` such blocks (capped: a block-stride loop covers the rest) */
#define NL_CU_RUN_BLOCKS(kernel, blocks, stream, ...) \
    kernel<<<nl_cu_cap_blocks(blocks), NL_CU_THREADS, 0, stream>>>(__VA_ARGS__)
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
