/* Reductions along one axis of a tile viewed as (m, k, n) (kernels/cpu/axis.h):
 * element (i, j, l) at (i*k + j)*n + l, a slice value s[i*n + l] (one per fiber x[i, :, l]),
 * a fiber value f[j]. A reduction runs one thread per output value, summing in double
 * along j in order. Where an output takes alpha/beta, beta == 0 overwrites it unread. The
 * broadcasts (add_slice, mul_fiber, ...) are formulas of the codelet table: generated. */
#include "common.cuh"

/* out = alpha·acc + beta·out (beta == 0: out not read), as nl_store in kernels/cpu/axis.h */
__device__ static inline void store(float alpha, float beta, double acc, float *out)
{
    *out = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *out));
}

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], that) when accumulate; a NaN wins */
__global__ static void max_slice(int64_t m, int64_t k, int64_t n, int32_t accumulate,
                                 const float *x, float *s)
{
    NL_CU_FOR(e, m * n) {
        const float *p = x + e / n * k * n + e % n;
        float mx = -INFINITY;
        for (int64_t j = 0; j < k; j++) mx = nl_cu_max_nan(mx, p[j * n]);
        s[e] = accumulate ? nl_cu_max_nan(s[e], mx) : mx;
    }
}

const char *nl_cu_max_slice(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                            int32_t accumulate, const float *x, float *s)
{
    NL_CU_LAUNCH(max_slice, m * n, stream, m, k, n, accumulate, x, s);
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]: one block, each thread a strided partial sum,
 * then a tree over the block's partial sums (a fixed order: reproducible) */
__global__ static void sumsq_all(int64_t n, float alpha, float beta, const float *x, float *s)
{
    __shared__ double part[NL_CU_THREADS];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += (double)x[i] * x[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) store(alpha, beta, part[0], s);
}

const char *nl_cu_sumsq_all(cudaStream_t stream, int64_t n, float alpha, float beta,
                            const float *x, float *s)
{
    NL_CU_RUN_BLOCK(sumsq_all, stream, n, alpha, beta, x, s);   /* n = 0: s = beta·s */
    return nl_cu_launched();
}
