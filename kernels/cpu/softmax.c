/* Softmax along one axis of a tile viewed as (m, k, n) (see axis.h): slices hold one
 * value per (i, l). When the axis is split into several tiles, the tiled op chains
 * per-tile passes over it; when it fits in one tile, a *_tile kernel does the whole op in
 * a single task. softmax_apply and softmax_backward, one value at a time, are formulas
 * of the codelet table (kernels/codelets.py): generated. */
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
