/* Cross-entropy over a vocabulary split into tiles. A logits tile holds n tokens
 * × vt vocabulary entries [voff, voff + vt); per token, stats keeps
 * (m, s, picked) = (running max, Σ exp(x − m), the label's logit), merged tile
 * by tile in the stable online form (Milakov & Gimelshein 2018):
 *   m' = max(m, max_j x[j]),  s' = s·exp(m − m') + Σ_j exp(x[j] − m')
 * loss_i = m + log s − picked = logsumexp(x_i) − x_i[label_i]
 * dx[i, j] = scale · (exp(x[i, j] − m)/s − [voff + j == label_i]) */
#include <math.h>
#include "core.h"
#include "fastexp.h"

/* first: the tile with voff = 0, which starts the stats and checks the labels */
void nl_cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, int64_t vocab, int32_t first,
                            const float *x, const int64_t *labels, float *stats)
{
    if (first)
        for (int64_t i = 0; i < n; i++)
            if (labels[i] < 0 || labels[i] >= vocab) {
                nl_error("cross_entropy: label %lld is outside the vocabulary of %lld "
                         "tokens (valid labels are 0..%lld)", (long long)labels[i],
                         (long long)vocab, (long long)vocab - 1);
                return;
            }
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * vt;
        float *st = stats + 4 * i;
        float m = first ? -INFINITY : st[0];
        double s = first ? 0.0 : (double)st[1] + st[2];
        float lm = -INFINITY;
        for (int64_t j = 0; j < vt; j++) lm = fmaxf(lm, row[j]);
        if (lm > m) {
            if (s > 0) s *= exp((double)m - lm);
            m = lm;
        }
        if (m > -INFINITY)  /* an all −∞ row adds nothing (and no NaN) */
            for (int64_t j = 0; j < vt; j++) s += nl_expf(row[j] - m);
        st[0] = m;
        st[1] = (float)s;
        st[2] = (float)(s - (double)st[1]);
        int64_t c = labels[i] - voff;
        if (c >= 0 && c < vt) st[3] = row[c];
        else if (first) st[3] = 0.0f;
    }
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
        for (int64_t j = 0; j < vt; j++) d[j] = k * nl_expf(row[j] - m);
        int64_t c = labels[i] - voff;
        if (c >= 0 && c < vt) d[c] -= scale;
    }
}
