/* Generation with a KV cache (nntile_lab/ops/decode.py, docs/generation.md): writing new
 * positions' keys and values into the cache tiles, and attention of a few query positions
 * over the cached prefix, one (batch tile, head tile) per task.
 *
 * Layouts. A cache tile holds (b, h, s, d) values, C order: b batch rows, h heads, s cache
 * positions, d = head size. A query, key or value tile of the model is (b, t, h·d) — the
 * projections' output, E tiled by whole heads — or (b, h, t, d) after a heads-first
 * permute; the kernels take it through its strides (batch row sb, position st, head sh;
 * the d values of one head are contiguous), so neither layout needs a permute task.
 *
 * Which keys a query sees (left padding, generate/batching.py): query at position q of
 * row r, whose first pads[r] positions are pads, sees keys p with min(pads[r], q) ≤ p ≤ q.
 * A real query sees only real keys; a pad query sees only itself. Keys past q are never
 * read, so unwritten cache positions need no zero fill.
 */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cache[r, j, c0 + i, :] = x[r·sb + (x0 + i)·st + j·sh + (0..d-1)] for i < n: positions
 * x0 … x0+n-1 of a (b, ·, h, d)-strided tile into positions c0 … c0+n-1 of a cache tile of
 * cs positions. */
void nl_kv_write(int64_t b, int64_t h, int64_t d, int64_t sb, int64_t st, int64_t sh,
                 int64_t x0, int64_t cs, int64_t c0, int64_t n, const float *x, float *cache)
{
    for (int64_t r = 0; r < b; r++)
        for (int64_t j = 0; j < h; j++)
            for (int64_t i = 0; i < n; i++)
                memcpy(cache + ((r * h + j) * cs + c0 + i) * d,
                       x + r * sb + (x0 + i) * st + j * sh, (size_t)d * sizeof(float));
}

/* Attention of tq queries (positions q0 … q0+tq-1) over tk cached keys (positions
 * k0 … k0+tk-1), as one step of an online softmax over the cache's tiles:
 *
 *   s_p = scale · q·k_p                     for the keys p the query sees (above)
 *   m' = max(m, max_p s_p);  l' = l·e^(m−m') + Σ_p e^(s_p−m');  y' = y·e^(m−m') + Σ_p e^(s_p−m')·v_p
 *
 * Grouped-query heads: the tile holds h key/value heads and h·g query heads, query head j
 * reading key/value head j / g (Hugging Face's repeat_kv order; g = 1 without groups).
 * y (b, tq, h·g, d), strided like q (yb, yt, yh), holds the unnormalised sum; stats
 * (b, tq, h·g, 2) the running (m, l). ``first``: start from m = −inf, l = 0, y = 0 (y and stats
 * are then written, never read); ``last``: finish with y = y / l. A query that sees no key
 * of this tile leaves its y, m and l as they were. */
void nl_attend(int64_t b, int64_t h, int64_t g, int64_t d, int64_t tq, int64_t tk, int64_t q0,
               int64_t k0, int64_t qb, int64_t qt, int64_t qh, int64_t yb, int64_t yt, int64_t yh,
               float scale, int32_t first, int32_t last, const float *q, const int64_t *pads,
               const float *k, const float *v, float *y, float *stats)
{
    float *s = malloc((size_t)(tk > 0 ? tk : 1) * sizeof(float));
    if (!s)
        abort();   /* a few KiB; StarPU's task would fail the same way on its own */
    for (int64_t r = 0; r < b; r++)
        for (int64_t j = 0; j < h * g; j++) {   /* query head j reads key/value head j / g */
            const float *kh = k + (r * h + j / g) * tk * d, *vh = v + (r * h + j / g) * tk * d;
            for (int64_t i = 0; i < tq; i++) {
                const int64_t pos = q0 + i, pad = pads[r];
                const int64_t lo = (pad < pos ? pad : pos) - k0, hi = pos - k0;  /* keys lo..hi */
                const int64_t p0 = lo > 0 ? lo : 0, p1 = hi < tk - 1 ? hi : tk - 1;
                const float *qi = q + r * qb + i * qt + j * qh;
                float *yi = y + r * yb + i * yt + j * yh;
                float *st = stats + ((r * tq + i) * h * g + j) * 2;
                float m = first ? -INFINITY : st[0], l = first ? 0.0f : st[1];
                if (first)
                    for (int64_t e = 0; e < d; e++) yi[e] = 0.0f;
                if (p0 <= p1) {
                    float mx = -INFINITY;
                    for (int64_t p = p0; p <= p1; p++) {
                        const float *kp = kh + p * d;
                        float dot = 0.0f;
                        for (int64_t e = 0; e < d; e++) dot += qi[e] * kp[e];
                        s[p] = scale * dot;
                        if (s[p] > mx) mx = s[p];
                    }
                    const float mnew = mx > m ? mx : m;
                    const float c = m == -INFINITY ? 0.0f : expf(m - mnew);
                    l *= c;
                    for (int64_t e = 0; e < d; e++) yi[e] *= c;
                    for (int64_t p = p0; p <= p1; p++) {
                        const float w = expf(s[p] - mnew);
                        const float *vp = vh + p * d;
                        l += w;
                        for (int64_t e = 0; e < d; e++) yi[e] += w * vp[e];
                    }
                    m = mnew;
                }
                if (last) {
                    const float inv = 1.0f / l;   /* l ≥ 1: every query sees itself */
                    for (int64_t e = 0; e < d; e++) yi[e] *= inv;
                }
                st[0] = m;
                st[1] = l;
            }
        }
    free(s);
}
