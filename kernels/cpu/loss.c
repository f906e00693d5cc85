/* Cross-entropy over a vocabulary split into tiles. A logits tile holds n tokens
 * × vt vocabulary entries [voff, voff + vt). Per token and vocabulary tile, stats
 * holds (m, s_hi, s_lo, picked): the tile's max, Σ_j exp(x[j] − m) in double
 * precision as two floats (a loss near 0 is log s with s ≈ 1, where one float's
 * 1e-7 would be a 1e-4 relative error), and the label's logit if the label falls in
 * the tile (else 0). The tiles' stats are computed in parallel, then merged in
 * order (the stable online form, Milakov & Gimelshein 2018):
 *   m = max(m1, m2),  s = s1·exp(m1 − m) + s2·exp(m2 − m),  picked = p1 + p2
 * loss_i = m + log s − picked = logsumexp(x_i) − x_i[label_i]
 * dx[i, j] = scale · (exp(x[i, j] − m)/s − [voff + j == label_i]) */
#include "prototypes.h"
#include <math.h>
#include "core.h"
#include "cross_entropy_merge.h"
#include "fastexp.h"
#include "ids.h"

/* Reductions over a row in LANES independent partial results, which the compiler
 * turns into SIMD (a single running value would be a serial chain): */
enum { LANES = 16 };

static float row_max(int64_t vt, const float *row)
{
    float lane[LANES];
    for (int q = 0; q < LANES; q++) lane[q] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= vt; j += LANES)
        for (int q = 0; q < LANES; q++) lane[q] = row[j + q] > lane[q] ? row[j + q] : lane[q];
    float m = -INFINITY;
    for (int q = 0; q < LANES; q++) m = fmaxf(m, lane[q]);
    for (; j < vt; j++) m = fmaxf(m, row[j]);
    return m;
}

/* Σ_j exp(row[j] − m): float lanes over blocks of 1024 values, summed in double */
static double row_sumexp(int64_t vt, const float *row, float m)
{
    double s = 0.0;
    int64_t j = 0;
    while (j + LANES <= vt) {
        float lane[LANES] = {0};
        int64_t end = j + 1024 < vt ? j + 1024 : vt;
        for (; j + LANES <= end; j += LANES)
            for (int q = 0; q < LANES; q++) lane[q] += nl_expf(row[j + q] - m);
        for (int q = 0; q < LANES; q++) s += lane[q];
    }
    for (; j < vt; j++) s += nl_expf(row[j] - m);
    return s;
}

/* The tile at voff = 0 also checks the labels, so a bad one is reported once. */
void nl_cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, int64_t vocab,
                            const float *x, const int64_t *labels, float *stats)
{
    if (voff == 0 && !nl_ids_in_range("cross_entropy", "label", n, vocab, labels)) return;
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * vt;
        float *st = stats + 4 * i;
        float m = row_max(vt, row);
        double s = m > -INFINITY ? row_sumexp(vt, row, m) : 0.0;  /* all −∞: no NaN */
        int64_t c = labels[i] - voff;
        st[0] = m;
        st[1] = (float)s;
        st[2] = (float)(s - (double)st[1]);
        st[3] = c >= 0 && c < vt ? row[c] : 0.0f;
    }
}

/* stats ← merge(stats, part), token by token (see above) */
void nl_cross_entropy_merge(int64_t n, float *stats, const float *part)
{
    for (int64_t i = 0; i < n; i++)
        nl_cross_entropy_merge_one(stats + 4 * i, part + 4 * i);
}

/* loss[0] = (first ? 0 : loss[0]) + scale · Σ_i (m_i + log s_i − picked_i) */
void nl_cross_entropy_loss(int64_t n, float scale, int32_t first, const float *stats,
                           float *loss)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *st = stats + 4 * i;
        sum += (double)st[0] + log((double)st[1] + st[2]) - st[3];
    }
    loss[0] = (float)((first ? 0.0 : loss[0]) + scale * sum);
}

void nl_cross_entropy_backward(int64_t n, int64_t vt, int64_t voff, float scale,
                               const float *x, const int64_t *labels, const float *stats,
                               float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * vt, *st = stats + 4 * i;
        float m = st[0], k = (float)(scale / ((double)st[1] + st[2]));
        float *d = dx + i * vt;
        /* the label's logit is read first: dx may be x itself (the gradient written over
         * the logits, ops.cross_entropy(out=logits)) */
        int64_t c = labels[i] - voff;
        float xc = c >= 0 && c < vt ? row[c] : 0.0f;
        for (int64_t j = 0; j < vt; j++) d[j] = k * nl_expf(row[j] - m);
        /* the label's entry is scale·(p − 1): with p near 1, k·e − scale in float would
         * cancel to a few correct digits, so it is formed in double as −scale·(s − e)/s */
        if (c >= 0 && c < vt) {
            double s = (double)st[1] + st[2], e = nl_expf(xc - m);
            d[c] = (float)(-(double)scale * ((s - e) / s));
        }
    }
}
