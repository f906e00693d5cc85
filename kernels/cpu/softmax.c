/* Softmax along one axis of a tile viewed as (m, k, n) (see axis.h): slices hold one
 * value per (i, l). When the axis is split into several tiles, the tiled op chains
 * per-tile passes over it; when it fits in one tile, a *_tile kernel does the whole op in
 * a single task. Every pass but softmax_tile (a max, then sums) is a formula of the
 * codelet table (kernels/codelets.py): generated. */
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
