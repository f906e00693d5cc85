/* Reductions along one axis of a tile viewed as (m, k, n) (see axis.h). s is a slice
 * (one value per (i, l)), f a fiber (one value per j). Where an output takes alpha/beta,
 * beta == 0 overwrites it without reading. The broadcasts (add_slice, mul_fiber, ...) are
 * formulas of the codelet table: generated. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "axis.h"

/* s[i,l] = alpha · Σ_j x[i,j,l] + beta · s[i,l] */
NL_INLINE void sum_slice(struct nl_group G, int lanes, float alpha, float beta, const float *x,
                         float *s)
{
    double acc[NL_NB] = {0};
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) acc[q] += p[q];
    }
    nl_store_slice(G, lanes, alpha, beta, acc, s);
}

void nl_sum_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *s)
{
    NL_FOR_GROUPS(m, k, n, sum_slice, alpha, beta, x, s);
}

/* s[i,l] = alpha · Σ_j x[i,j,l]² + beta · s[i,l] */
NL_INLINE void sumsq_slice(struct nl_group G, int lanes, float alpha, float beta,
                           const float *x, float *s)
{
    double acc[NL_NB] = {0};
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) acc[q] += (double)p[q] * p[q];
    }
    nl_store_slice(G, lanes, alpha, beta, acc, s);
}

void nl_sumsq_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                    float *s)
{
    NL_FOR_GROUPS(m, k, n, sumsq_slice, alpha, beta, x, s);
}

/* s[i,l] = alpha · Σ_j a[i,j,l]·b[i,j,l] + beta · s[i,l] */
NL_INLINE void sumprod_slice(struct nl_group G, int lanes, float alpha, float beta,
                             const float *a, const float *b, float *s)
{
    double acc[NL_NB] = {0};
    for (int64_t c = 0; c < G.nc; c++) {
        const float *pa = a + G.x + c * G.sc, *pb = b + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) acc[q] += (double)pa[q] * pb[q];
    }
    nl_store_slice(G, lanes, alpha, beta, acc, s);
}

void nl_sumprod_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *a,
                      const float *b, float *s)
{
    NL_FOR_GROUPS(m, k, n, sumprod_slice, alpha, beta, a, b, s);
}

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], max_j x[i,j,l]) when accumulate.
 * -inf entries are ordinary values; a NaN wins, so it is not silently dropped. */
NL_INLINE void max_slice(struct nl_group G, int lanes, int32_t accumulate, const float *x,
                         float *s)
{
    float mx[NL_NB];
    nl_group_max(G, lanes, x, mx);
    float *o = s + G.s;
    for (int64_t q = 0; q < (lanes ? 1 : G.nb); q++)
        o[q] = (!accumulate || (mx[q] > o[q]) | (mx[q] != mx[q])) ? mx[q] : o[q];
}

void nl_max_slice(int64_t m, int64_t k, int64_t n, int32_t accumulate, const float *x, float *s)
{
    NL_FOR_GROUPS(m, k, n, max_slice, accumulate, x, s);
}

/* f[j] = alpha · Σ_{i,l} x[i,j,l] + beta · f[j] */
void nl_sum_fiber(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *f)
{
    if (n == 1) {  /* rows of x run along the axis: NL_NB positions j at a time */
        for (int64_t j0 = 0; j0 < k; j0 += NL_NB) {
            int64_t nj = k - j0 < NL_NB ? k - j0 : NL_NB;
            double acc[NL_NB] = {0};
            for (int64_t i = 0; i < m; i++) {
                const float *p = x + i * k + j0;
                for (int64_t q = 0; q < nj; q++) acc[q] += p[q];
            }
            nl_store(nj, alpha, beta, acc, f + j0);
        }
        return;
    }
    /* each (i, j) holds n contiguous values: NL_NB lanes of partial sums per j */
    for (int64_t j = 0; j < k; j++) {
        double acc[NL_NB] = {0}, t = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t l0 = 0; l0 < n; l0 += NL_NB) {
                const float *p = x + (i * k + j) * n + l0;
                for (int64_t q = 0; q < (n - l0 < NL_NB ? n - l0 : NL_NB); q++) acc[q] += p[q];
            }
        for (int64_t q = 0; q < NL_NB; q++) t += acc[q];
        nl_store(1, alpha, beta, &t, f + j);
    }
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]  (NL_NB partial sums: vectorised) */
void nl_sumsq_all(int64_t n, float alpha, float beta, const float *x, float *s)
{
    double acc[NL_NB] = {0}, total = 0;
    for (int64_t i0 = 0; i0 < n; i0 += NL_NB) {
        const float *p = x + i0;
        for (int64_t q = 0; q < (n - i0 < NL_NB ? n - i0 : NL_NB); q++)
            acc[q] += (double)p[q] * p[q];
    }
    for (int64_t q = 0; q < NL_NB; q++) total += acc[q];
    nl_store(1, alpha, beta, &total, s);
}
