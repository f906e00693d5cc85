/* Layer normalisation along one axis of a tile viewed as (m, k, n) (see axis.h): slices
 * hold one value per (i, l), fibers one per j. When the axis is split into several tiles,
 * the tiled op chains per-tile passes over it; when it fits in one tile, a *_tile kernel
 * does the whole op in a single task. layer_norm_apply and layer_norm_backward_dx, one
 * value at a time, are formulas of the codelet table (kernels/codelets.py): generated. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "axis.h"

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
