/* Layer normalisation along one axis of a tile viewed as (m, k, n) (see axis.h): slices
 * hold one value per (i, l), fibers one per j. When the axis is split into several tiles,
 * the tiled op chains per-tile passes over it; when it fits in one tile, a *_tile kernel
 * does the whole op in a single task. Every pass but layer_norm_tile (two reductions, then
 * y) is a formula of the codelet table (kernels/codelets.py): generated. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>


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

/* The whole forward of a tile holding the full axis (three passes, in cache) */
void nl_layer_norm_tile(int64_t m, int64_t k, int64_t n, float eps, const float *x,
                        const float *gamma, const float *bias, float *y, float *mean,
                        float *inv_std)
{
    nl_sum_slice(m, k, n, 1.0f / (float)k, 0.0f, x, mean);
    nl_layer_norm_invstd(m, k, n, 1.0f / (float)k, 0.0f, eps, 1, x, mean, inv_std);
    nl_layer_norm_apply(m, k, n, x, mean, inv_std, gamma, bias, y);
}
