/* Reductions and broadcasts along one axis of a tile viewed as (m, k, n) (see
 * axis.h). s is a slice (one value per (i, l)), f a fiber (one value per j).
 * Where an output takes alpha/beta, beta == 0 overwrites it without reading. */
#include <math.h>
#include <stdint.h>

#include "axis.h"

/* s[i,l] = alpha · Σ_j x[i,j,l] + beta · s[i,l] */
void nl_sum_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double acc[NL_NB] = {0};
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) acc[q] += p[q * G.sq];
        }
        nl_store(G.nb, alpha, beta, acc, s + G.s);
    }
}

/* s[i,l] = alpha · Σ_j x[i,j,l]² + beta · s[i,l] */
void nl_sumsq_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                    float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double acc[NL_NB] = {0};
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) acc[q] += (double)p[q * G.sq] * p[q * G.sq];
        }
        nl_store(G.nb, alpha, beta, acc, s + G.s);
    }
}

/* s[i,l] = alpha · Σ_j a[i,j,l]·b[i,j,l] + beta · s[i,l] */
void nl_sumprod_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *a,
                      const float *b, float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double acc[NL_NB] = {0};
        for (int64_t j = 0; j < k; j++) {
            const float *pa = a + G.x + j * G.sj, *pb = b + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) acc[q] += (double)pa[q * G.sq] * pb[q * G.sq];
        }
        nl_store(G.nb, alpha, beta, acc, s + G.s);
    }
}

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], max_j x[i,j,l]) when accumulate.
 * -inf entries are ordinary values; a NaN wins, so it is not silently dropped. */
void nl_max_slice(int64_t m, int64_t k, int64_t n, int32_t accumulate, const float *x, float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        float mx[NL_NB];
        for (int64_t q = 0; q < G.nb; q++) mx[q] = accumulate ? s[G.s + q] : -INFINITY;
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) {
                float v = p[q * G.sq];
                mx[q] = (v > mx[q] || v != v) ? v : mx[q];
            }
        }
        for (int64_t q = 0; q < G.nb; q++) s[G.s + q] = mx[q];
    }
}

/* f[j] = alpha · Σ_{i,l} x[i,j,l] + beta · f[j] */
void nl_sum_fiber(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *f)
{
    for (int64_t j0 = 0; j0 < k; j0 += NL_NB) {
        int64_t nj = k - j0 < NL_NB ? k - j0 : NL_NB;
        double acc[NL_NB] = {0};
        for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
            struct nl_group G = nl_group_at(m, k, n, g);
            for (int64_t jj = 0; jj < nj; jj++) {
                const float *p = x + G.x + (j0 + jj) * G.sj;
                double t = 0;
                for (int64_t q = 0; q < G.nb; q++) t += p[q * G.sq];
                acc[jj] += t;
            }
        }
        nl_store(nj, alpha, beta, acc, f + j0);
    }
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]  (eight partial sums: pipelined, vectorised) */
void nl_sumsq_all(int64_t n, float alpha, float beta, const float *x, float *s)
{
    double acc[8] = {0}, total = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int q = 0; q < 8; q++) acc[q] += (double)x[i + q] * x[i + q];
    for (; i < n; i++) total += (double)x[i] * x[i];
    for (int q = 0; q < 8; q++) total += acc[q];
    nl_store(1, alpha, beta, &total, s);
}

/* x[i,j,l] = alpha · s[i,l] + beta · x[i,j,l] */
void nl_add_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *s,
                  float *x)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *sv = s + G.s;
        for (int64_t j = 0; j < k; j++) {
            float *p = x + G.x + j * G.sj;
            if (beta == 0.0f)
                for (int64_t q = 0; q < G.nb; q++) p[q * G.sq] = alpha * sv[q];
            else
                for (int64_t q = 0; q < G.nb; q++)
                    p[q * G.sq] = alpha * sv[q] + beta * p[q * G.sq];
        }
    }
}

/* x[i,j,l] = s[i,l] · x[i,j,l] */
void nl_mul_slice(int64_t m, int64_t k, int64_t n, const float *s, float *x)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *sv = s + G.s;
        for (int64_t j = 0; j < k; j++) {
            float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) p[q * G.sq] *= sv[q];
        }
    }
}

/* x[i,j,l] = alpha · f[j] + beta · x[i,j,l]. The axis is most often the last one
 * (n == 1: a bias add): called with a constant n = 1 the l loop vanishes and the
 * loop along contiguous j vectorises. */
static inline __attribute__((always_inline)) void add_fiber(
    int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *f, float *x)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++) {
            float *p = x + (i * k + j) * n, v = alpha * f[j];
            if (beta == 0.0f)
                for (int64_t l = 0; l < n; l++) p[l] = v;
            else
                for (int64_t l = 0; l < n; l++) p[l] = v + beta * p[l];
        }
}

void nl_add_fiber(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *f,
                  float *x)
{
    if (n == 1)
        add_fiber(m, k, 1, alpha, beta, f, x);
    else
        add_fiber(m, k, n, alpha, beta, f, x);
}

/* x[i,j,l] = f[j] · x[i,j,l]  (n == 1 specialised as in add_fiber) */
static inline __attribute__((always_inline)) void mul_fiber(
    int64_t m, int64_t k, int64_t n, const float *f, float *x)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < k; j++) {
            float *p = x + (i * k + j) * n, v = f[j];
            for (int64_t l = 0; l < n; l++) p[l] *= v;
        }
}

void nl_mul_fiber(int64_t m, int64_t k, int64_t n, const float *f, float *x)
{
    if (n == 1)
        mul_fiber(m, k, 1, f, x);
    else
        mul_fiber(m, k, n, f, x);
}
