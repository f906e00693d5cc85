/* Cross-entropy from bf16 logits (the bf16 precision modes' head, nn/precision.py): the
 * same stats and gradient as loss.c — computed in float32, the stats' sum in double —
 * but the logits tile x is read as bf16, widened (exactly) in registers, and the
 * gradient dx is written as bf16, rounded once from its float32 value. The stats tiles
 * stay float32 and go through loss.c's merge and loss kernels unchanged. Storing both
 * B·T·V tensors in bf16 halves the largest temporaries of a step: out of core they are
 * most of the bytes evicted on long sequences or large vocabularies (docs/precision.md).
 *   stats: (max, Σ exp(x − max) as two floats, the label's logit)
 *   dx[i, j] = bf16(scale · (exp(x[i, j] − m)/s − [voff + j == label_i])) */
#include "prototypes.h"
#include <math.h>
#include "formula.h"
#include "core.h"
#include "fastexp.h"
#include "ids.h"

/* A row is read in blocks of BLOCK values widened into a float buffer on the stack (L1),
 * then reduced as loss.c does, in LANES independent partial results: the widening and the
 * reductions each vectorise as plain loops (widened inside the lane loop, they did not). */
enum { LANES = 16, BLOCK = 1024 };

static void widen(int64_t n, const uint16_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = nl_bf16_widen(x[i]);
}

static float block_max(int64_t n, const float *x, float m)
{
    float lane[LANES];
    for (int q = 0; q < LANES; q++) lane[q] = m;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int q = 0; q < LANES; q++) lane[q] = x[j + q] > lane[q] ? x[j + q] : lane[q];
    for (int q = 0; q < LANES; q++) m = fmaxf(m, lane[q]);
    for (; j < n; j++) m = fmaxf(m, x[j]);
    return m;
}

/* Σ_j exp(x[j] − m) over one block: float lanes, summed in double (as loss.c) */
static double block_sumexp(int64_t n, const float *x, float m)
{
    float lane[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int q = 0; q < LANES; q++) lane[q] += nl_expf(x[j + q] - m);
    double s = 0.0;
    for (int q = 0; q < LANES; q++) s += lane[q];
    for (; j < n; j++) s += nl_expf(x[j] - m);
    return s;
}

static float row_max16(int64_t vt, const uint16_t *row, float *buf)
{
    float m = -INFINITY;
    for (int64_t j = 0; j < vt; j += BLOCK) {
        int64_t n = vt - j < BLOCK ? vt - j : BLOCK;
        widen(n, row + j, buf);
        m = block_max(n, buf, m);
    }
    return m;
}

static double row_sumexp16(int64_t vt, const uint16_t *row, float m, float *buf)
{
    double s = 0.0;
    for (int64_t j = 0; j < vt; j += BLOCK) {
        int64_t n = vt - j < BLOCK ? vt - j : BLOCK;
        widen(n, row + j, buf);
        s += block_sumexp(n, buf, m);
    }
    return s;
}

/* The tile at voff = 0 also checks the labels, so a bad one is reported once. */
void nl_cross_entropy_stats_bf16(int64_t n, int64_t vt, int64_t voff, int64_t vocab,
                                 const uint16_t *x, const int64_t *labels, float *stats)
{
    if (voff == 0 && !nl_ids_in_range("cross_entropy", "label", n, vocab, labels)) return;
    float buf[BLOCK];
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *row = x + i * vt;
        float *st = stats + 4 * i;
        float m = row_max16(vt, row, buf);
        double s = m > -INFINITY ? row_sumexp16(vt, row, m, buf) : 0.0;  /* all −∞: no NaN */
        int64_t c = labels[i] - voff;
        st[0] = m;
        st[1] = (float)s;
        st[2] = (float)(s - (double)st[1]);
        st[3] = c >= 0 && c < vt ? nl_bf16_widen(row[c]) : 0.0f;
    }
}

void nl_cross_entropy_backward_bf16(int64_t n, int64_t vt, int64_t voff, float scale,
                                    const uint16_t *x, const int64_t *labels,
                                    const float *stats, uint16_t *dx)
{
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *row = x + i * vt;
        const float *st = stats + 4 * i;
        float m = st[0], k = (float)(scale / ((double)st[1] + st[2]));
        uint16_t *d = dx + i * vt;
        /* the label's logit is read first: dx may be x itself (written over the logits) */
        int64_t c = labels[i] - voff;
        float xc = c >= 0 && c < vt ? nl_bf16_widen(row[c]) : 0.0f;
        for (int64_t j = 0; j < vt; j++)
            d[j] = nl_bf16_round(k * nl_expf(nl_bf16_widen(row[j]) - m));
        /* the label's entry, scale·(p − 1), formed in double as in loss.c (no cancellation) */
        if (c >= 0 && c < vt) {
            double s = (double)st[1] + st[2], e = nl_expf(xc - m);
            d[c] = nl_bf16_round((float)(-(double)scale * ((s - e) / s)));
        }
    }
}
