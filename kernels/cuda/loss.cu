/* Cross-entropy over a vocabulary split into tiles, as kernels/cpu/loss.c (read its header
 * comment): per token and vocabulary tile, stats = (m, s_hi, s_lo, picked); the tiles'
 * stats merged in order  m = max(m1, m2), s = s1·exp(m1 − m) + s2·exp(m2 − m);
 * loss_i = m + log s − picked;  dx[i, j] = scale·(exp(x[i, j] − m)/s − [voff + j == label_i]) */
#include "common.cuh"
#include "../cross_entropy_merge.h"

/* one thread per token: the row's max, then Σ exp(x − max) in double */
__global__ static void cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, const float *x,
                                           const int64_t *labels, float *stats)
{
    NL_CU_FOR(i, n) {
        const float *row = x + i * vt;
        float m = -INFINITY;
        for (int64_t j = 0; j < vt; j++) m = fmaxf(m, row[j]);
        double s = 0.0;
        if (m > -INFINITY)   /* all −∞: no NaN */
            for (int64_t j = 0; j < vt; j++) s += expf(row[j] - m);
        int64_t c = labels[i] - voff;
        float *st = stats + 4 * i;
        st[0] = m;
        st[1] = (float)s;
        st[2] = (float)(s - (double)st[1]);
        st[3] = c >= 0 && c < vt ? row[c] : 0.0f;
    }
}

/* the tile at voff = 0 checks the labels, so a bad one is reported once */
const char *nl_cu_cross_entropy_stats(cudaStream_t stream, int64_t n, int64_t vt, int64_t voff,
                                      int64_t vocab, const float *x, const int64_t *labels,
                                      float *stats)
{
    const char *err = voff == 0 ? nl_cu_check_ids(stream, "cross_entropy: label", "labels", n,
                                                  vocab, labels)
                                : NULL;
    if (err) return err;
    NL_CU_LAUNCH(cross_entropy_stats, n, stream, n, vt, voff, x, labels, stats);
}

__global__ static void cross_entropy_merge(int64_t n, float *stats, const float *part)
{
    NL_CU_FOR(i, n) nl_cross_entropy_merge_one(stats + 4 * i, part + 4 * i);
}

const char *nl_cu_cross_entropy_merge(cudaStream_t stream, int64_t n, float *stats,
                                      const float *part)
{
    NL_CU_LAUNCH(cross_entropy_merge, n, stream, n, stats, part);
}

/* loss[0] = (first ? 0 : loss[0]) + scale·Σ_i (m_i + log s_i − picked_i): one block, a
 * strided partial sum per thread, then a tree (a fixed order) */
__global__ static void cross_entropy_loss(int64_t n, float scale, int32_t first,
                                          const float *stats, float *loss)
{
    __shared__ double part[NL_CU_THREADS];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float *st = stats + 4 * i;
        acc += (double)st[0] + log((double)st[1] + st[2]) - st[3];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) loss[0] = (float)((first ? 0.0 : loss[0]) + scale * part[0]);
}

const char *nl_cu_cross_entropy_loss(cudaStream_t stream, int64_t n, float scale,
                                     int32_t first, const float *stats, float *loss)
{
    NL_CU_RUN_BLOCK(cross_entropy_loss, stream, n, scale, first, stats, loss);
    return nl_cu_launched();
}

/* one thread per value; dx may be x (each thread reads its own value first). The label's
 * entry is scale·(p − 1), formed in double as −scale·(s − e)/s: no cancellation for p ≈ 1 */
__global__ static void cross_entropy_backward(int64_t n, int64_t vt, int64_t voff, float scale,
                                              const float *x, const int64_t *labels,
                                              const float *stats, float *dx)
{
    NL_CU_FOR(id, n * vt) {
        const int64_t i = id / vt, j = id % vt;
        const float *st = stats + 4 * i;
        const double s = (double)st[1] + st[2];
        const float e = expf(x[id] - st[0]);
        dx[id] = labels[i] - voff == j ? (float)(-(double)scale * ((s - e) / s))
                                       : (float)(scale / s) * e;
    }
}

const char *nl_cu_cross_entropy_backward(cudaStream_t stream, int64_t n, int64_t vt,
                                         int64_t voff, float scale, const float *x,
                                         const int64_t *labels, const float *stats, float *dx)
{
    NL_CU_LAUNCH(cross_entropy_backward, n * vt, stream, n, vt, voff, scale, x, labels, stats,
                 dx);
}
