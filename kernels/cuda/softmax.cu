/* Softmax along one axis of an (m, k, n) tile: the formulas and the split-axis passes of
 * kernels/cpu/softmax.c (read its header comment), one thread per fiber x[i, :, l] (slice
 * entry e = i*n + l), sums in double along j in order. softmax_apply and softmax_backward
 * are formulas of the codelet table: generated (formulas.cu). */
#include "common.cuh"

/* the fiber of slice entry e: its first element, then stride n */
#define FIBER(e) ((e) / n * k * n + (e) % n)

/* ---- softmax: y = exp(x − max_j x) / Σ_j exp(x − max_j x) ---------------------- */

/* s[e] = Σ_j exp(x − mx[e]) + beta·s[e] */
__global__ static void softmax_sumexp(int64_t m, int64_t k, int64_t n, float beta,
                                      const float *x, const float *mx, float *s)
{
    NL_CU_FOR(e, m * n) {
        const float *p = x + FIBER(e);
        double acc = 0;
        for (int64_t j = 0; j < k; j++) acc += expf(p[j * n] - mx[e]);
        s[e] = (float)(acc + (beta == 0.0f ? 0.0 : (double)beta * s[e]));
    }
}

const char *nl_cu_softmax_sumexp(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                                 float beta, const float *x, const float *mx, float *s)
{
    NL_CU_LAUNCH(softmax_sumexp, m * n, stream, m, k, n, beta, x, mx, s);
}

/* the whole softmax of a fiber: max, y = exp(x − max) while summing, y /= sum */
__global__ static void softmax_tile(int64_t m, int64_t k, int64_t n, const float *x, float *y)
{
    NL_CU_FOR(e, m * n) {
        const int64_t f = FIBER(e);
        float mx = -INFINITY;
        for (int64_t j = 0; j < k; j++) mx = nl_cu_max_nan(mx, x[f + j * n]);
        double acc = 0;
        for (int64_t j = 0; j < k; j++) {
            float v = expf(x[f + j * n] - mx);
            y[f + j * n] = v;
            acc += v;
        }
        const float r = (float)(1.0 / acc);
        for (int64_t j = 0; j < k; j++) y[f + j * n] *= r;
    }
}

const char *nl_cu_softmax_tile(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                               const float *x, float *y)
{
    NL_CU_LAUNCH(softmax_tile, m * n, stream, m, k, n, x, y);
}

/* Σ_j dy·y and Σ_j y along the fiber f */
__device__ static inline void softmax_sums(int64_t k, int64_t n, int64_t f, const float *y,
                                           const float *dy, double *sdy, double *sy)
{
    *sdy = *sy = 0;
    for (int64_t j = 0; j < k; j++) {
        *sdy += (double)dy[f + j * n] * y[f + j * n];
        *sy += y[f + j * n];
    }
}

/* dx = y·(dy − s) + beta·dx along the fiber f */
__device__ static inline void softmax_dx(int64_t k, int64_t n, int64_t f, float beta,
                                         const float *y, const float *dy, double s, float *dx)
{
    for (int64_t j = 0; j < k; j++) {
        const int64_t o = f + j * n;
        float v = (float)(y[o] * (dy[o] - s));
        dx[o] = beta == 0.0f ? v : v + beta * dx[o];
    }
}

/* sums = four blocks of m·n: hi, lo of Σ dy·y, then hi, lo of Σ y (+ themselves when
 * accumulate): ~48 bits between tasks, as on the CPU */
__global__ static void softmax_backward_sums(int64_t m, int64_t k, int64_t n,
                                             int32_t accumulate, const float *y,
                                             const float *dy, float *sums)
{
    const int64_t mn = m * n;
    NL_CU_FOR(e, mn) {
        double acc[2];
        softmax_sums(k, n, FIBER(e), y, dy, &acc[0], &acc[1]);
        for (int b = 0; b < 2; b++) {
            float *hi = sums + 2 * b * mn + e, *lo = hi + mn;
            double v = acc[b] + (accumulate ? (double)*hi + *lo : 0.0);
            *hi = (float)v;
            *lo = (float)(v - *hi);
        }
    }
}

const char *nl_cu_softmax_backward_sums(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                                        int32_t accumulate, const float *y, const float *dy,
                                        float *sums)
{
    NL_CU_LAUNCH(softmax_backward_sums, m * n, stream, m, k, n, accumulate, y, dy, sums);
}

__global__ static void softmax_backward_tile(int64_t m, int64_t k, int64_t n, float beta,
                                             const float *y, const float *dy, float *dx)
{
    NL_CU_FOR(e, m * n) {
        double sdy, sy;
        softmax_sums(k, n, FIBER(e), y, dy, &sdy, &sy);
        softmax_dx(k, n, FIBER(e), beta, y, dy, sdy / sy, dx);
    }
}

const char *nl_cu_softmax_backward_tile(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                                        float beta, const float *y, const float *dy, float *dx)
{
    NL_CU_LAUNCH(softmax_backward_tile, m * n, stream, m, k, n, beta, y, dy, dx);
}
