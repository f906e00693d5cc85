/* Softmax along one axis of an (m, k, n) tile: the formulas and the split-axis passes of
 * kernels/cpu/softmax.c (read its header comment), one thread per fiber x[i, :, l] (slice
 * entry e = i*n + l), sums in double along j in order. Every pass but softmax_tile is a
 * formula of the codelet table: generated (formulas.cu). */
#include "common.cuh"

/* the fiber of slice entry e: its first element, then stride n */
#define FIBER(e) ((e) / n * k * n + (e) % n)

/* ---- softmax: y = exp(x − max_j x) / Σ_j exp(x − max_j x) ---------------------- */

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
