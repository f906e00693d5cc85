/* The CUDA kernels on the host, for tests on machines without a GPU
 * (tests/kernels/test_cuda_emulated.py): g++ compiles the same .cu files with NL_CU_EMULATE
 * defined, and this header stands in for the CUDA runtime. Element-wise (grid-stride)
 * kernels run their threads one after another on a small grid of several blocks and
 * threads, so that the index arithmetic of each thread is exercised. A reduction's blocks
 * (NL_CU_RUN_COOP: shared memory, __syncthreads) run one after another, each as NL_CU_RED
 * real threads meeting at a barrier, __shared__ arrays being the block's statics: the
 * tree's index arithmetic, the lanes' and chunks' bounds and the barriers' placement run
 * as on a GPU (a missing barrier shows as a race, often but not always). What this cannot
 * show: the GPU's own expf (the host's libm stands in), warp timing. cuBLAS (gemm.cu) is
 * not emulated. */
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __shared__ static   /* one block runs at a time: its threads share the statics */
#define __syncthreads() nl_emu_barrier_here->wait()

typedef void *cudaStream_t;
typedef void *cublasHandle_t;
typedef enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 } cudaError_t;
typedef enum {
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2
} cudaMemcpyKind;

struct nl_emu_dim3 { unsigned x, y, z; };
static thread_local nl_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind)
{
    memcpy(dst, src, n);
    return cudaSuccess;
}
template <typename T>
static inline cudaError_t cudaMemcpyToSymbolAsync(T &symbol, const void *src, size_t n,
                                                  size_t offset, cudaMemcpyKind, cudaStream_t)
{
    memcpy((char *)&symbol + offset, src, n);
    return cudaSuccess;
}
template <typename T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const T &symbol, size_t n,
                                                    size_t offset, cudaMemcpyKind, cudaStream_t)
{
    memcpy(dst, (const char *)&symbol + offset, n);
    return cudaSuccess;
}

static inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v)
{
    unsigned long long old = *a;
    if (v < old) *a = v;
    return old;
}
static inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the threads of one emulated block meet here (__syncthreads) */
struct nl_emu_barrier {
    std::mutex mu;
    std::condition_variable cv;
    unsigned count, waiting = 0, generation = 0;
    explicit nl_emu_barrier(unsigned n) : count(n) {}
    void wait()
    {
        std::unique_lock<std::mutex> lock(mu);
        const unsigned gen = generation;
        if (++waiting == count) {
            waiting = 0;
            generation++;
            cv.notify_all();
        } else {
            cv.wait(lock, [&] { return generation != gen; });
        }
    }
};
static thread_local nl_emu_barrier *nl_emu_barrier_here;

static inline void nl_emu_at(unsigned blocks, unsigned threads, unsigned b, unsigned t)
{
    gridDim = {blocks, 1, 1};
    blockDim = {threads, 1, 1};
    blockIdx = {b, 0, 0};
    threadIdx = {t, 0, 0};
}

/* run body on blocks × threads emulated threads, one after another (no barrier in body) */
template <typename F> static void nl_emu_run(unsigned blocks, unsigned threads, F body)
{
    nl_emu_barrier alone(1);
    nl_emu_barrier_here = &alone;
    for (unsigned b = 0; b < blocks; b++)
        for (unsigned t = 0; t < threads; t++) {
            nl_emu_at(blocks, threads, b, t);
            body();
        }
}

/* run body on `blocks` blocks of `threads` real threads each, the blocks one after another */
template <typename F> static void nl_emu_run_blocks(unsigned blocks, unsigned threads, F body)
{
    for (unsigned b = 0; b < blocks; b++) {
        nl_emu_barrier bar(threads);
        std::vector<std::thread> team;
        for (unsigned t = 0; t < threads; t++)
            team.emplace_back([&, b, t] {
                nl_emu_at(blocks, threads, b, t);
                nl_emu_barrier_here = &bar;
                body();
            });
        for (auto &th : team) th.join();
    }
}

static inline cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n);
    return *p ? cudaSuccess : cudaErrorInvalidValue;
}

/* a small grid whatever the launch asked for: 3 blocks of 4 threads (grid-stride loops
 * cover the rest); a reduction on at most NL_CU_MAX_GRID (5) blocks of NL_CU_RED (8)
 * threads, its group loop covering the rest */
#define NL_CU_RUN(kernel, blocks, threads, stream, ...) \
    nl_emu_run(3, 4, [&] { kernel(__VA_ARGS__); })
#define NL_CU_RUN_COOP(kernel, G, stream, ...) \
    nl_emu_run_blocks(nl_cu_grid(G), NL_CU_RED, [&] { kernel(__VA_ARGS__); })
