/* The CUDA kernels on the host, for tests on machines without a GPU
 * (tests/kernels/test_cuda_emulated.py): g++ compiles the same .cu files with NL_CU_EMULATE
 * defined, and this header stands in for the CUDA runtime. A launch runs its threads one
 * after another: grid-stride kernels on a small grid of several blocks and threads (so the
 * index arithmetic of each thread is exercised), and a cooperating block (NL_CU_RUN_BLOCK:
 * shared memory, __syncthreads) as one thread, which its loops then cover alone. What this
 * cannot show: races between threads, and the GPU's own expf (the host's libm stands in).
 * cuBLAS (gemm.cu) is not emulated. */
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __shared__
#define __syncthreads() ((void)0)

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

/* run body on blocks × threads emulated threads, one after another */
template <typename F> static void nl_emu_run(unsigned blocks, unsigned threads, F body)
{
    gridDim = {blocks, 1, 1};
    blockDim = {threads, 1, 1};
    for (unsigned b = 0; b < blocks; b++)
        for (unsigned t = 0; t < threads; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            body();
        }
}

/* a small grid whatever the launch asked for: 3 blocks of 4 threads (grid-stride loops
 * cover the rest) */
#define NL_CU_RUN(kernel, blocks, threads, stream, ...) \
    nl_emu_run(3, 4, [&] { kernel(__VA_ARGS__); })
#define NL_CU_RUN_BLOCK(kernel, stream, ...) nl_emu_run(1, 1, [&] { kernel(__VA_ARGS__); })
/* cooperating blocks: 3 of one thread each (block-stride loops cover the rest) */
#define NL_CU_RUN_BLOCKS(kernel, blocks, stream, ...) \
    nl_emu_run(3, 1, [&] { kernel(__VA_ARGS__); })
