/* Softmax along one axis of an (m, k, n) tile: the formulas and the split-axis passes of
 * kernels/cpu/softmax.c (read its header comment). Every pass but softmax_tile is a formula
 * of the codelet table: generated (formulas.cu). */
#include "common.cuh"

/* ---- softmax: y = exp(x − max_j x) / Σ_j exp(x − max_j x) ---------------------- */

/* the whole softmax of a fiber x[i, :, l] (slice entry e = i*n + l), one block's lanes per
 * fiber (common.cuh): the max, y = exp(x − max) while summing in double, y /= sum. y may
 * be x: the max's fold waits for every lane's reads before any writes */
__global__ static void softmax_tile(const struct nl_cu_geo G, int64_t k, int64_t n,
                                    const float *x, float *y)
{
    __shared__ float mred[NL_CU_RED];
    __shared__ double sred[NL_CU_RED];
    const int r = nl_cu_result(G), q = nl_cu_lane(G);
    for (int64_t g = blockIdx.x; g < G.groups; g += gridDim.x) {
        const int64_t e = g * G.per + r;
        const int on = e < G.entries;
        const int64_t f = on ? e / n * k * n + e % n : 0;
        float mx = -INFINITY;
        for (int64_t j = q; on && j < k; j += G.lanes) mx = nl_cu_max_nan(mx, x[f + j * n]);
        mred[q * G.per + r] = mx;
        nl_cu_fold<NL_CU_MAX_NAN>(mred, 1, G, q, r);
        mx = mred[r];
        double acc = 0;
        for (int64_t j = q; on && j < k; j += G.lanes) {
            const float v = expf(x[f + j * n] - mx);
            y[f + j * n] = v;
            acc += v;
        }
        sred[q * G.per + r] = acc;
        nl_cu_fold<NL_CU_SUM>(sred, 1, G, q, r);
        const float rs = (float)(1.0 / sred[r]);
        for (int64_t j = q; on && j < k; j += G.lanes) y[f + j * n] *= rs;
        __syncthreads();   /* mred, sred read by all before the next group's */
    }
}

const char *nl_cu_softmax_tile(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                               const float *x, float *y)
{
    const struct nl_cu_geo G = nl_cu_geometry(m * n, k, n == 1, 1, NULL);
    if (G.entries <= 0) return NULL;
    NL_CU_RUN_COOP(softmax_tile, G, stream, G, k, n, x, y);
    return nl_cu_launched();
}
