/* Softmax and layer normalisation along one axis of a tile viewed as (m, k, n)
 * (see axis.h): slices hold one value per (i, l), fibers one per j. When the axis
 * is split into several tiles, the tiled op chains per-tile passes over it; when
 * it fits in one tile, a *_tile kernel does the whole op in a single task. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "axis.h"
#include "fastexp.h"

/* ---- softmax ---------------------------------------------------------------
 *   y = exp(x − max_j x) / Σ_j exp(x − max_j x)
 * Subtracting the max keeps exp from overflowing; -inf entries (masks) give 0,
 * and each fiber must hold a finite value. Split axis: max_slice (axis.c) gives
 * mx, softmax_sumexp accumulates the sums over the tiles, softmax_apply writes y.
 * Backward:  dx = y ⊙ (dy − s) + beta·dx,  s = Σ_j dy ⊙ y / Σ_j y.
 * Σ_j y is 1 but for y's rounding; dividing by it keeps Σ_j dx = 0 exact up to
 * dx's own rounding, as for the true gradient (softmax ignores a shift of x): a
 * key bias in attention, whose gradient is this sum, then gets ~0, not noise.
 * For a peaked y, dy − s cancels at the peak: the sums are kept to ~48 bits (in
 * double, or between tasks as float pairs hi + lo), so dx is as accurate as its
 * float inputs. Split axis: softmax_backward_sums accumulates both sums over the
 * tiles, then softmax_backward writes dx. */

/* s[i,l] = Σ_j exp(x[i,j,l] − mx[i,l]) + beta · s[i,l] */
NL_INLINE void softmax_sumexp(struct nl_group G, int lanes, float beta, const float *x,
                              const float *mx, float *s)
{
    float mv[NL_NB];
    double acc[NL_NB] = {0};
    nl_load_slice(G, lanes, mx, mv);
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) acc[q] += nl_expf(p[q] - mv[q]);
    }
    nl_store_slice(G, lanes, 1.0f, beta, acc, s);
}

void nl_softmax_sumexp(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                       const float *mx, float *s)
{
    NL_FOR_GROUPS(m, k, n, softmax_sumexp, beta, x, mx, s);
}

/* y[i,j,l] = exp(x[i,j,l] − mx[i,l]) / s[i,l]  (y may be x) */
NL_INLINE void softmax_apply(struct nl_group G, int lanes, const float *x, const float *mx,
                             const float *s, float *y)
{
    float mv[NL_NB], r[NL_NB];
    nl_load_slice(G, lanes, mx, mv);
    nl_load_slice(G, lanes, s, r);
    for (int64_t q = 0; q < G.nb; q++) r[q] = 1.0f / r[q];
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        float *o = y + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) o[q] = nl_expf(p[q] - mv[q]) * r[q];
    }
}

void nl_softmax_apply(int64_t m, int64_t k, int64_t n, const float *x, const float *mx,
                      const float *s, float *y)
{
    NL_FOR_GROUPS(m, k, n, softmax_apply, x, mx, s, y);
}

/* The whole softmax of a tile holding the full axis: max, then y = exp(x − max)
 * while summing it, then y /= sum — one exp per value (y may be x). */
NL_INLINE void softmax_tile(struct nl_group G, int lanes, const float *x, float *y)
{
    float mx[NL_NB], r[NL_NB];
    double acc[NL_NB] = {0};
    nl_group_max(G, lanes, x, mx);
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        float *o = y + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            float e = nl_expf(p[q] - mx[q]);
            o[q] = e;
            acc[q] += e;
        }
    }
    nl_fold_sum(G, lanes, acc);
    for (int64_t q = 0; q < G.nb; q++) r[q] = (float)(1.0 / acc[q]);
    for (int64_t c = 0; c < G.nc; c++) {
        float *o = y + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) o[q] *= r[q];
    }
}

void nl_softmax_tile(int64_t m, int64_t k, int64_t n, const float *x, float *y)
{
    NL_FOR_GROUPS(m, k, n, softmax_tile, x, y);
}

/* sdy[q] = Σ dy·y and sy[q] = Σ y over the group's lanes, folded */
NL_INLINE void softmax_sums(struct nl_group G, int lanes, const float *y, const float *dy,
                            double *sdy, double *sy)
{
    for (int64_t q = 0; q < NL_NB; q++) sdy[q] = sy[q] = 0;  /* all: nl_fold_sum */
    for (int64_t c = 0; c < G.nc; c++) {
        const float *py = y + G.x + c * G.sc, *pd = dy + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            sdy[q] += (double)pd[q] * py[q];
            sy[q] += py[q];
        }
    }
    nl_fold_sum(G, lanes, sdy);
    nl_fold_sum(G, lanes, sy);
}

/* dx = y ⊙ (dy − s) + beta·dx over the group, s[q] its lanes' s */
NL_INLINE void softmax_dx(struct nl_group G, float beta, const float *y, const float *dy,
                          const double *s, float *dx)
{
    for (int64_t c = 0; c < G.nc; c++) {
        const float *py = y + G.x + c * G.sc, *pd = dy + G.x + c * G.sc;
        float *o = dx + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            float v = (float)(py[q] * (pd[q] - s[q]));
            o[q] = beta == 0.0f ? v : v + beta * o[q];
        }
    }
}

/* Σ_j dy ⊙ y and Σ_j y (+ themselves when accumulate) as float pairs: sums holds
 * four blocks of mn values, hi and lo of the first sum, then of the second */
NL_INLINE void softmax_backward_sums(struct nl_group G, int lanes, int64_t mn,
                                     int32_t accumulate, const float *y, const float *dy,
                                     float *sums)
{
    double acc[2][NL_NB];
    softmax_sums(G, lanes, y, dy, acc[0], acc[1]);
    for (int b = 0; b < 2; b++) {
        float *hi = sums + 2 * b * mn + G.s, *lo = hi + mn;
        for (int64_t q = 0; q < (lanes ? 1 : G.nb); q++) {
            double v = acc[b][q] + (accumulate ? (double)hi[q] + lo[q] : 0.0);
            hi[q] = (float)v;
            lo[q] = (float)(v - hi[q]);
        }
    }
}

void nl_softmax_backward_sums(int64_t m, int64_t k, int64_t n, int32_t accumulate,
                              const float *y, const float *dy, float *sums)
{
    NL_FOR_GROUPS(m, k, n, softmax_backward_sums, m * n, accumulate, y, dy, sums);
}

NL_INLINE void softmax_backward(struct nl_group G, int lanes, int64_t mn, float beta,
                                const float *y, const float *dy, const float *sums, float *dx)
{
    double s[NL_NB];
    for (int64_t q = 0; q < G.nb; q++) {
        const float *e = sums + G.s + (lanes ? 0 : q);
        s[q] = ((double)e[0] + e[mn]) / ((double)e[2 * mn] + e[3 * mn]);
    }
    softmax_dx(G, beta, y, dy, s, dx);
}

void nl_softmax_backward(int64_t m, int64_t k, int64_t n, float beta, const float *y,
                         const float *dy, const float *sums, float *dx)
{
    NL_FOR_GROUPS(m, k, n, softmax_backward, m * n, beta, y, dy, sums, dx);
}

/* The whole backward of a tile holding the full axis: the sums, then dx */
NL_INLINE void softmax_backward_tile(struct nl_group G, int lanes, float beta, const float *y,
                                     const float *dy, float *dx)
{
    double s[NL_NB], sy[NL_NB];
    softmax_sums(G, lanes, y, dy, s, sy);
    for (int64_t q = 0; q < G.nb; q++) s[q] /= sy[q];
    softmax_dx(G, beta, y, dy, s, dx);
}

void nl_softmax_backward_tile(int64_t m, int64_t k, int64_t n, float beta, const float *y,
                              const float *dy, float *dx)
{
    NL_FOR_GROUPS(m, k, n, softmax_backward_tile, beta, y, dy, dx);
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
NL_INLINE void layer_norm_invstd(struct nl_group G, int lanes, float alpha, float beta,
                                 float eps, int32_t finish, const float *x, const float *mean,
                                 float *s)
{
    float mu[NL_NB];
    double acc[NL_NB] = {0};
    nl_load_slice(G, lanes, mean, mu);
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            double d = (double)p[q] - mu[q];
            acc[q] += d * d;
        }
    }
    nl_fold_sum(G, lanes, acc);
    float *o = s + G.s;
    for (int64_t q = 0; q < (lanes ? 1 : G.nb); q++) {
        double v = alpha * acc[q] + (beta == 0.0f ? 0.0 : (double)beta * o[q]);
        o[q] = (float)(finish ? 1.0 / sqrt(v + eps) : v);
    }
}

void nl_layer_norm_invstd(int64_t m, int64_t k, int64_t n, float alpha, float beta, float eps,
                          int32_t finish, const float *x, const float *mean, float *s)
{
    NL_FOR_GROUPS(m, k, n, layer_norm_invstd, alpha, beta, eps, finish, x, mean, s);
}

/* y[i,j,l] = (x[i,j,l] − mean[i,l])·r[i,l]·gamma[j] + bias[j]  (y may be x) */
NL_INLINE void layer_norm_apply(struct nl_group G, int lanes, const float *x, const float *mean,
                                const float *inv_std, const float *gamma, const float *bias,
                                float *y)
{
    float mu[NL_NB], r[NL_NB];
    nl_load_slice(G, lanes, mean, mu);
    nl_load_slice(G, lanes, inv_std, r);
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        float *o = y + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            int64_t j = nl_j(lanes, c, q);
            o[q] = (p[q] - mu[q]) * r[q] * gamma[j] + bias[j];
        }
    }
}

void nl_layer_norm_apply(int64_t m, int64_t k, int64_t n, const float *x, const float *mean,
                         const float *inv_std, const float *gamma, const float *bias, float *y)
{
    NL_FOR_GROUPS(m, k, n, layer_norm_apply, x, mean, inv_std, gamma, bias, y);
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

/* a1[q] = Σ g,  a2[q] = Σ g·xhat  over the group's lanes, folded */
NL_INLINE void ln_sums(struct nl_group G, int lanes, const float *x, const float *dy,
                       const float *gamma, const float *mean, const float *inv_std,
                       double *a1, double *a2)
{
    float mu[NL_NB], r[NL_NB];
    nl_load_slice(G, lanes, mean, mu);
    nl_load_slice(G, lanes, inv_std, r);
    for (int64_t q = 0; q < NL_NB; q++) a1[q] = a2[q] = 0;  /* all: nl_fold_sum */
    for (int64_t c = 0; c < G.nc; c++) {
        const float *px = x + G.x + c * G.sc, *pd = dy + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            double gv = (double)pd[q] * gamma[nl_j(lanes, c, q)];
            a1[q] += gv;
            a2[q] += gv * (((double)px[q] - mu[q]) * r[q]);
        }
    }
    nl_fold_sum(G, lanes, a1);
    nl_fold_sum(G, lanes, a2);
}

/* dx = r·(g − s1 − xhat·s2) + beta·dx over the group (s1, s2: its lanes' means) */
NL_INLINE void ln_dx(struct nl_group G, int lanes, float beta, const float *x, const float *dy,
                     const float *gamma, const float *mean, const float *inv_std,
                     const double *s1, const double *s2, float *dx)
{
    float mu[NL_NB], r[NL_NB];
    nl_load_slice(G, lanes, mean, mu);
    nl_load_slice(G, lanes, inv_std, r);
    for (int64_t c = 0; c < G.nc; c++) {
        const float *px = x + G.x + c * G.sc, *pd = dy + G.x + c * G.sc;
        float *o = dx + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++) {
            double xhat = ((double)px[q] - mu[q]) * r[q];
            double g = (double)pd[q] * gamma[nl_j(lanes, c, q)];
            float v = (float)(r[q] * (g - s1[q] - xhat * s2[q]));
            o[q] = beta == 0.0f ? v : v + beta * o[q];
        }
    }
}

NL_INLINE void layer_norm_backward_sums(struct nl_group G, int lanes, int64_t mn, float alpha,
                                        float beta, const float *x, const float *dy,
                                        const float *gamma, const float *mean,
                                        const float *inv_std, float *sums)
{
    double a1[NL_NB], a2[NL_NB];
    ln_sums(G, lanes, x, dy, gamma, mean, inv_std, a1, a2);
    nl_store(lanes ? 1 : G.nb, alpha, beta, a1, sums + G.s);
    nl_store(lanes ? 1 : G.nb, alpha, beta, a2, sums + mn + G.s);
}

void nl_layer_norm_backward_sums(int64_t m, int64_t k, int64_t n, float alpha, float beta,
                                 const float *x, const float *dy, const float *gamma,
                                 const float *mean, const float *inv_std, float *sums)
{
    NL_FOR_GROUPS(m, k, n, layer_norm_backward_sums, m * n, alpha, beta, x, dy, gamma, mean,
                  inv_std, sums);
}

NL_INLINE void layer_norm_backward_dx(struct nl_group G, int lanes, int64_t mn, float beta,
                                      const float *x, const float *dy, const float *gamma,
                                      const float *mean, const float *inv_std,
                                      const float *sums, float *dx)
{
    double s1[NL_NB], s2[NL_NB];
    for (int64_t q = 0; q < G.nb; q++) {
        int64_t e = G.s + (lanes ? 0 : q);
        s1[q] = sums[e];
        s2[q] = sums[mn + e];
    }
    ln_dx(G, lanes, beta, x, dy, gamma, mean, inv_std, s1, s2, dx);
}

void nl_layer_norm_backward_dx(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                               const float *dy, const float *gamma, const float *mean,
                               const float *inv_std, const float *sums, float *dx)
{
    NL_FOR_GROUPS(m, k, n, layer_norm_backward_dx, m * n, beta, x, dy, gamma, mean, inv_std,
                  sums, dx);
}

/* dx of a tile holding the full axis: the sums, then dx, group by group */
NL_INLINE void layer_norm_backward_tile(struct nl_group G, int lanes, int64_t k, float beta,
                                        const float *x, const float *dy, const float *gamma,
                                        const float *mean, const float *inv_std, float *dx)
{
    double a1[NL_NB], a2[NL_NB];
    ln_sums(G, lanes, x, dy, gamma, mean, inv_std, a1, a2);
    for (int64_t q = 0; q < G.nb; q++) {
        a1[q] /= k;
        a2[q] /= k;
    }
    ln_dx(G, lanes, beta, x, dy, gamma, mean, inv_std, a1, a2, dx);
}

void nl_layer_norm_backward_tile(int64_t m, int64_t k, int64_t n, float beta, const float *x,
                                 const float *dy, const float *gamma, const float *mean,
                                 const float *inv_std, float *dx)
{
    NL_FOR_GROUPS(m, k, n, layer_norm_backward_tile, k, beta, x, dy, gamma, mean, inv_std, dx);
}

/* dgamma[j] = Σ_{i,l} dy·xhat + beta_gamma·dgamma[j]
 * dbias[j]  = Σ_{i,l} dy      + beta_bias·dbias[j]   (loops as in sum_fiber) */
void nl_layer_norm_backward_fiber(int64_t m, int64_t k, int64_t n, float beta_gamma,
                                  float beta_bias, const float *x, const float *dy,
                                  const float *mean, const float *inv_std, float *dgamma,
                                  float *dbias)
{
    if (n == 1) {
        for (int64_t j0 = 0; j0 < k; j0 += NL_NB) {
            int64_t nj = k - j0 < NL_NB ? k - j0 : NL_NB;
            double ag[NL_NB] = {0}, ab[NL_NB] = {0};
            for (int64_t i = 0; i < m; i++) {
                const float *px = x + i * k + j0, *pd = dy + i * k + j0;
                double mu = mean[i], r = inv_std[i];
                for (int64_t q = 0; q < nj; q++) {
                    ab[q] += pd[q];
                    ag[q] += pd[q] * ((px[q] - mu) * r);
                }
            }
            nl_store(nj, 1.0f, beta_gamma, ag, dgamma + j0);
            nl_store(nj, 1.0f, beta_bias, ab, dbias + j0);
        }
        return;
    }
    for (int64_t j = 0; j < k; j++) {
        double ag[NL_NB] = {0}, ab[NL_NB] = {0}, tg = 0, tb = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t l0 = 0; l0 < n; l0 += NL_NB) {
                const float *px = x + (i * k + j) * n + l0, *pd = dy + (i * k + j) * n + l0;
                const float *mu = mean + i * n + l0, *r = inv_std + i * n + l0;
                for (int64_t q = 0; q < (n - l0 < NL_NB ? n - l0 : NL_NB); q++) {
                    ab[q] += pd[q];
                    ag[q] += pd[q] * (((double)px[q] - mu[q]) * r[q]);
                }
            }
        for (int64_t q = 0; q < NL_NB; q++) {
            tg += ag[q];
            tb += ab[q];
        }
        nl_store(1, 1.0f, beta_gamma, &tg, dgamma + j);
        nl_store(1, 1.0f, beta_bias, &tb, dbias + j);
    }
}
