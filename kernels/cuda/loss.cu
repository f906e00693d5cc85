/* Cross-entropy over a vocabulary split into tiles, as kernels/cpu/loss.c (read its header
 * comment): per token and vocabulary tile, stats = (m, s_hi, s_lo, picked); the tiles'
 * stats merged in order  m = max(m1, m2), s = s1·exp(m1 − m) + s2·exp(m2 − m);
 * loss_i = m + log s − picked;  dx[i, j] = scale·(exp(x[i, j] − m)/s − [voff + j == label_i]) */
#include "common.cuh"
#include "../cross_entropy_merge.h"
#include "../formula.h"

/* The stats of one token's row, one block's lanes per row (common.cuh): the row's max (a
 * NaN loses, as fmaxf in the C kernel), then Σ exp(x − max) in double, each folded by the
 * tree. T: float, or uint16_t (bf16, widened exactly) */
__device__ static inline float nl_cu_logit(const float *row, int64_t j) { return row[j]; }
__device__ static inline float nl_cu_logit(const uint16_t *row, int64_t j)
{
    return nl_bf16_widen(row[j]);
}

template <typename T>
__global__ static void cross_entropy_stats(const struct nl_cu_geo G, int64_t vt, int64_t voff,
                                           const T *x, const int64_t *labels, float *stats)
{
    __shared__ float mred[NL_CU_RED];
    __shared__ double sred[NL_CU_RED];
    const int r = nl_cu_result(G), q = nl_cu_lane(G);
    for (int64_t g = blockIdx.x; g < G.groups; g += gridDim.x) {
        const int64_t i = g * G.per + r;
        const int on = i < G.entries;
        const T *row = x + (on ? i : 0) * vt;
        float m = -INFINITY;
        for (int64_t j = q; on && j < vt; j += G.lanes) m = fmaxf(m, nl_cu_logit(row, j));
        mred[q * G.per + r] = m;
        nl_cu_fold<NL_CU_FMAX>(mred, 1, G, q, r);
        m = mred[r];
        double s = 0.0;
        if (m > -INFINITY)   /* all −∞: no NaN */
            for (int64_t j = q; on && j < vt; j += G.lanes) s += expf(nl_cu_logit(row, j) - m);
        sred[q * G.per + r] = s;
        nl_cu_fold<NL_CU_SUM>(sred, 1, G, q, r);
        if (on && q == 0) {
            s = sred[r];
            const int64_t c = labels[i] - voff;
            float *st = stats + 4 * i;
            st[0] = m;
            st[1] = (float)s;
            st[2] = (float)(s - (double)st[1]);
            st[3] = c >= 0 && c < vt ? nl_cu_logit(row, c) : 0.0f;
        }
        __syncthreads();   /* mred, sred read by all before the next group's */
    }
}

/* the tile at voff = 0 checks the labels, so a bad one is reported once */
template <typename T>
static const char *stats_launch(cudaStream_t stream, int64_t n, int64_t vt, int64_t voff,
                                int64_t vocab, const T *x, const int64_t *labels, float *stats)
{
    const char *err = voff == 0 ? nl_cu_check_ids(stream, "cross_entropy: label", "labels", n,
                                                  vocab, labels)
                                : NULL;
    if (err) return err;
    const struct nl_cu_geo G = nl_cu_geometry(n, vt, 1, 1, NULL);
    if (G.entries <= 0) return NULL;
    NL_CU_RUN_COOP(cross_entropy_stats<T>, G, stream, G, vt, voff, x, labels, stats);
    return nl_cu_launched();
}

const char *nl_cu_cross_entropy_stats(cudaStream_t stream, int64_t n, int64_t vt, int64_t voff,
                                      int64_t vocab, const float *x, const int64_t *labels,
                                      float *stats)
{
    return stats_launch(stream, n, vt, voff, vocab, x, labels, stats);
}

/* the same from bf16 logits (kernels/cpu/loss_bf16.c) */
const char *nl_cu_cross_entropy_stats_bf16(cudaStream_t stream, int64_t n, int64_t vt,
                                           int64_t voff, int64_t vocab, const uint16_t *x,
                                           const int64_t *labels, float *stats)
{
    return stats_launch(stream, n, vt, voff, vocab, x, labels, stats);
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

/* loss[0] = (first ? 0 : loss[0]) + scale·Σ_i (m_i + log s_i − picked_i): one block's
 * lanes over the tokens, the tree (a fixed order) */
__global__ static void cross_entropy_loss(const struct nl_cu_geo G, float scale, int32_t first,
                                          const float *stats, float *loss)
{
    __shared__ double red[NL_CU_RED];
    const int r = nl_cu_result(G), q = nl_cu_lane(G);
    double acc = 0;
    for (int64_t i = q; r == 0 && i < G.len; i += G.lanes) {
        const float *st = stats + 4 * i;
        acc += (double)st[0] + log((double)st[1] + st[2]) - st[3];
    }
    red[q * G.per + r] = acc;
    nl_cu_fold<NL_CU_SUM>(red, 1, G, q, r);
    if (blockIdx.x == 0 && r == 0 && q == 0)
        loss[0] = (float)((first ? 0.0 : loss[0]) + scale * red[0]);
}

const char *nl_cu_cross_entropy_loss(cudaStream_t stream, int64_t n, float scale,
                                     int32_t first, const float *stats, float *loss)
{
    /* the n tokens as one result's values: one block (n = 0: loss = first ? 0 : loss) */
    const struct nl_cu_geo G = nl_cu_geometry(1, n, 1, 1, NULL);
    NL_CU_RUN_COOP(cross_entropy_loss, G, stream, G, scale, first, stats, loss);
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

/* the same from bf16 logits, the gradient rounded once to bf16 (kernels/cpu/loss_bf16.c):
 * one thread per value, its own logit read before its own gradient is written (dx may be
 * x) */
__global__ static void cross_entropy_backward_bf16(int64_t n, int64_t vt, int64_t voff,
                                                   float scale, const uint16_t *x,
                                                   const int64_t *labels, const float *stats,
                                                   uint16_t *dx)
{
    NL_CU_FOR(id, n * vt) {
        const int64_t i = id / vt, j = id % vt;
        const float *st = stats + 4 * i;
        const double s = (double)st[1] + st[2];
        const float e = expf(nl_bf16_widen(x[id]) - st[0]);
        dx[id] = nl_bf16_round(labels[i] - voff == j ? (float)(-(double)scale * ((s - e) / s))
                                                     : (float)(scale / s) * e);
    }
}

const char *nl_cu_cross_entropy_backward_bf16(cudaStream_t stream, int64_t n, int64_t vt,
                                              int64_t voff, float scale, const uint16_t *x,
                                              const int64_t *labels, const float *stats,
                                              uint16_t *dx)
{
    NL_CU_LAUNCH(cross_entropy_backward_bf16, n * vt, stream, n, vt, voff, scale, x, labels,
                 stats, dx);
}
