/* Softmax and layer normalisation along one axis of a tile viewed as (m, k, n)
 * (see axis.h): slices hold one value per (i, l), fibers one per j. When the axis
 * is split into several tiles, the tiled op chains per-tile passes over it; when
 * it fits in one tile, a *_tile kernel does the whole op in a single task. */
#include <math.h>
#include <stdint.h>

#include "axis.h"

/* ---- softmax ---------------------------------------------------------------
 *   y = exp(x − max_j x) / Σ_j exp(x − max_j x)
 * Subtracting the max keeps exp from overflowing; -inf entries (masks) give 0,
 * and each fiber must hold a finite value. Split axis: max_slice (axis.c) gives
 * mx, softmax_sumexp accumulates the sums over the tiles, softmax_apply writes y.
 * Backward:  dx = y ⊙ (dy − s) + beta·dx,  s = Σ_j dy ⊙ y.
 * For a peaked y, dy − s cancels at the peak: s is kept to ~48 bits (a double, or
 * between tasks a float pair hi + lo), so dx is as accurate as its float inputs.
 * Split axis: softmax_backward_sums accumulates s over the tiles, then
 * softmax_backward writes dx. */

/* s[i,l] = Σ_j exp(x[i,j,l] − mx[i,l]) + beta · s[i,l] */
void nl_softmax_sumexp(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                       const float *mx, float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *mv = mx + G.s;
        double acc[NL_NB] = {0};
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) acc[q] += expf(p[q * G.sq] - mv[q]);
        }
        nl_store(G.nb, 1.0f, beta, acc, s + G.s);
    }
}

/* y[i,j,l] = exp(x[i,j,l] − mx[i,l]) / s[i,l]  (y may be x) */
void nl_softmax_apply(int64_t m, int64_t k, int64_t n, const float *x, const float *mx,
                      const float *s, float *y)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *mv = mx + G.s;
        float r[NL_NB];
        for (int64_t q = 0; q < G.nb; q++) r[q] = 1.0f / s[G.s + q];
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            float *o = y + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) o[q * G.sq] = expf(p[q * G.sq] - mv[q]) * r[q];
        }
    }
}

/* The whole softmax of a tile holding the full axis: max, then y = exp(x − max)
 * while summing it, then y /= sum — one exp per value (y may be x). */
void nl_softmax_tile(int64_t m, int64_t k, int64_t n, const float *x, float *y)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        float mx[NL_NB], r[NL_NB];
        double acc[NL_NB] = {0};
        for (int64_t q = 0; q < G.nb; q++) mx[q] = -INFINITY;
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) {
                float v = p[q * G.sq];
                mx[q] = (v > mx[q] || v != v) ? v : mx[q];
            }
        }
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            float *o = y + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) {
                float e = expf(p[q * G.sq] - mx[q]);
                o[q * G.sq] = e;
                acc[q] += e;
            }
        }
        for (int64_t q = 0; q < G.nb; q++) r[q] = (float)(1.0 / acc[q]);
        for (int64_t j = 0; j < k; j++) {
            float *o = y + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) o[q * G.sq] *= r[q];
        }
    }
}

/* dx = y ⊙ (dy − s) + beta·dx over one group, s its slice sums */
static inline void softmax_backward_group(struct nl_group G, int64_t k, float beta,
                                          const float *y, const float *dy, const double *s,
                                          float *dx)
{
    for (int64_t j = 0; j < k; j++)
        for (int64_t q = 0; q < G.nb; q++) {
            int64_t t = G.x + j * G.sj + q * G.sq;
            float v = (float)(y[t] * (dy[t] - s[q]));
            dx[t] = beta == 0.0f ? v : v + beta * dx[t];
        }
}

/* acc[q] = Σ_j dy·y over one group */
static inline void softmax_sums_group(struct nl_group G, int64_t k, const float *y,
                                      const float *dy, double *acc)
{
    for (int64_t q = 0; q < G.nb; q++) acc[q] = 0;
    for (int64_t j = 0; j < k; j++)
        for (int64_t q = 0; q < G.nb; q++) {
            int64_t t = G.x + j * G.sj + q * G.sq;
            acc[q] += (double)dy[t] * y[t];
        }
}

/* s = Σ_j dy ⊙ y (+ s when accumulate), as hi = sums[i,l], lo = sums[mn + i,l] */
void nl_softmax_backward_sums(int64_t m, int64_t k, int64_t n, int32_t accumulate,
                              const float *y, const float *dy, float *sums)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double acc[NL_NB];
        float *hi = sums + G.s, *lo = sums + m * n + G.s;
        softmax_sums_group(G, k, y, dy, acc);
        for (int64_t q = 0; q < G.nb; q++) {
            double v = acc[q] + (accumulate ? (double)hi[q] + lo[q] : 0.0);
            hi[q] = (float)v;
            lo[q] = (float)(v - hi[q]);
        }
    }
}

void nl_softmax_backward(int64_t m, int64_t k, int64_t n, float beta, const float *y,
                         const float *dy, const float *sums, float *dx)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double s[NL_NB];
        for (int64_t q = 0; q < G.nb; q++) s[q] = (double)sums[G.s + q] + sums[m * n + G.s + q];
        softmax_backward_group(G, k, beta, y, dy, s, dx);
    }
}

/* The whole backward of a tile holding the full axis: the sums, then dx */
void nl_softmax_backward_tile(int64_t m, int64_t k, int64_t n, float beta, const float *y,
                              const float *dy, float *dx)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double s[NL_NB];
        softmax_sums_group(G, k, y, dy, s);
        softmax_backward_group(G, k, beta, y, dy, s, dx);
    }
}

/* ---- layer normalisation -----------------------------------------------------
 * With K values along the whole axis (over all its tiles):
 *   mean = Σ_j x / K,  var = Σ_j (x − mean)² / K  (biased),  r = 1/√(var + eps),
 *   y = (x − mean)·r·gamma[j] + bias[j]
 * Two passes for the statistics: the centred sum of squares stays accurate when
 * |mean| ≫ std, where E[x²] − mean² cancels. Split axis: sum_slice (axis.c,
 * alpha = 1/K) gives mean, layer_norm_invstd accumulates r over the tiles (the
 * last one finishes it), layer_norm_apply writes y.
 * Backward, with xhat = (x − mean)·r and g = dy·gamma[j]:
 *   dx        = r·(g − mean_j g − xhat·mean_j(g·xhat)) + beta·dx
 *   dgamma[j] = Σ_{i,l} dy·xhat,  dbias[j] = Σ_{i,l} dy  (each + its own beta·itself)
 * "sums" (2·m·n values) holds the slice means mean_j g, then mean_j g·xhat; split
 * axis: layer_norm_backward_sums accumulates them (alpha = 1/K), then
 * layer_norm_backward_dx. layer_norm_backward_fiber does dgamma and dbias apart,
 * so that their chain over all tiles stays off dx's path. */

/* acc = alpha · Σ_j (x − mean)² + beta · s;  s = finish ? 1/√(acc + eps) : acc */
void nl_layer_norm_invstd(int64_t m, int64_t k, int64_t n, float alpha, float beta, float eps,
                          int32_t finish, const float *x, const float *mean, float *s)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *mu = mean + G.s;
        double acc[NL_NB] = {0};
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            for (int64_t q = 0; q < G.nb; q++) {
                double d = (double)p[q * G.sq] - mu[q];
                acc[q] += d * d;
            }
        }
        float *o = s + G.s;
        for (int64_t q = 0; q < G.nb; q++) {
            double v = alpha * acc[q] + (beta == 0.0f ? 0.0 : (double)beta * o[q]);
            o[q] = (float)(finish ? 1.0 / sqrt(v + eps) : v);
        }
    }
}

/* y[i,j,l] = (x[i,j,l] − mean[i,l])·r[i,l]·gamma[j] + bias[j]  (y may be x) */
void nl_layer_norm_apply(int64_t m, int64_t k, int64_t n, const float *x, const float *mean,
                         const float *inv_std, const float *gamma, const float *bias, float *y)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        const float *mu = mean + G.s, *r = inv_std + G.s;
        for (int64_t j = 0; j < k; j++) {
            const float *p = x + G.x + j * G.sj;
            float *o = y + G.x + j * G.sj, gj = gamma[j], bj = bias[j];
            for (int64_t q = 0; q < G.nb; q++)
                o[q * G.sq] = (p[q * G.sq] - mu[q]) * r[q] * gj + bj;
        }
    }
}

/* The whole forward of a tile holding the full axis (three passes, in cache) */
void nl_layer_norm_tile(int64_t m, int64_t k, int64_t n, float eps, const float *x,
                        const float *gamma, const float *bias, float *y, float *mean,
                        float *inv_std)
{
    nl_sum_slice(m, k, n, 1.0f / (float)k, 0.0f, x, mean);
    nl_layer_norm_invstd(m, k, n, 1.0f / (float)k, 0.0f, eps, 1, x, mean, inv_std);
    nl_layer_norm_apply(m, k, n, x, mean, inv_std, gamma, bias, y);
}

/* a1[q] = Σ_j g,  a2[q] = Σ_j g·xhat  over one group */
static inline void ln_sums_group(struct nl_group G, int64_t k, const float *x, const float *dy,
                                 const float *gamma, const float *mu, const float *r,
                                 double *a1, double *a2)
{
    for (int64_t q = 0; q < G.nb; q++) a1[q] = a2[q] = 0;
    for (int64_t j = 0; j < k; j++)
        for (int64_t q = 0; q < G.nb; q++) {
            int64_t t = G.x + j * G.sj + q * G.sq;
            double gv = (double)dy[t] * gamma[j];
            a1[q] += gv;
            a2[q] += gv * (((double)x[t] - mu[q]) * r[q]);
        }
}

/* dx = r·(g − s1 − xhat·s2) + beta·dx over one group (s1, s2: its slice means) */
static inline void ln_dx_group(struct nl_group G, int64_t k, float beta, const float *x,
                               const float *dy, const float *gamma, const float *mu,
                               const float *r, const double *s1, const double *s2, float *dx)
{
    for (int64_t j = 0; j < k; j++)
        for (int64_t q = 0; q < G.nb; q++) {
            int64_t t = G.x + j * G.sj + q * G.sq;
            double xhat = ((double)x[t] - mu[q]) * r[q];
            float v = (float)(r[q] * ((double)dy[t] * gamma[j] - s1[q] - xhat * s2[q]));
            dx[t] = beta == 0.0f ? v : v + beta * dx[t];
        }
}

void nl_layer_norm_backward_sums(int64_t m, int64_t k, int64_t n, float alpha, float beta,
                                 const float *x, const float *dy, const float *gamma,
                                 const float *mean, const float *inv_std, float *sums)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double a1[NL_NB], a2[NL_NB];
        ln_sums_group(G, k, x, dy, gamma, mean + G.s, inv_std + G.s, a1, a2);
        nl_store(G.nb, alpha, beta, a1, sums + G.s);
        nl_store(G.nb, alpha, beta, a2, sums + m * n + G.s);
    }
}

void nl_layer_norm_backward_dx(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                               const float *dy, const float *gamma, const float *mean,
                               const float *inv_std, const float *sums, float *dx)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double s1[NL_NB], s2[NL_NB];
        for (int64_t q = 0; q < G.nb; q++) {
            s1[q] = sums[G.s + q];
            s2[q] = sums[m * n + G.s + q];
        }
        ln_dx_group(G, k, beta, x, dy, gamma, mean + G.s, inv_std + G.s, s1, s2, dx);
    }
}

/* dx of a tile holding the full axis: the sums, then dx, group by group */
void nl_layer_norm_backward_tile(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                                 const float *dy, const float *gamma, const float *mean,
                                 const float *inv_std, float *dx)
{
    for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
        struct nl_group G = nl_group_at(m, k, n, g);
        double a1[NL_NB], a2[NL_NB];
        ln_sums_group(G, k, x, dy, gamma, mean + G.s, inv_std + G.s, a1, a2);
        for (int64_t q = 0; q < G.nb; q++) {
            a1[q] /= k;
            a2[q] /= k;
        }
        ln_dx_group(G, k, beta, x, dy, gamma, mean + G.s, inv_std + G.s, a1, a2, dx);
    }
}

/* dgamma[j] = Σ_{i,l} dy·xhat + beta_gamma·dgamma[j]
 * dbias[j]  = Σ_{i,l} dy      + beta_bias·dbias[j] */
void nl_layer_norm_backward_fiber(int64_t m, int64_t k, int64_t n, float beta_gamma,
                                  float beta_bias, const float *x,
                                  const float *dy, const float *mean, const float *inv_std,
                                  float *dgamma, float *dbias)
{
    for (int64_t j0 = 0; j0 < k; j0 += NL_NB) {
        int64_t nj = k - j0 < NL_NB ? k - j0 : NL_NB;
        double ag[NL_NB] = {0}, ab[NL_NB] = {0};
        for (int64_t g = 0; g < nl_ngroups(m, n); g++) {
            struct nl_group G = nl_group_at(m, k, n, g);
            const float *mu = mean + G.s, *r = inv_std + G.s;
            for (int64_t jj = 0; jj < nj; jj++) {
                double tg = 0, tb = 0;
                for (int64_t q = 0; q < G.nb; q++) {
                    int64_t t = G.x + (j0 + jj) * G.sj + q * G.sq;
                    tb += dy[t];
                    tg += (double)dy[t] * (((double)x[t] - mu[q]) * r[q]);
                }
                ag[jj] += tg;
                ab[jj] += tb;
            }
        }
        nl_store(nj, 1.0f, beta_gamma, ag, dgamma + j0);
        nl_store(nj, 1.0f, beta_bias, ab, dbias + j0);
    }
}
