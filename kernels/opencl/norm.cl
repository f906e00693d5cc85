/* Layer normalisation along an axis of an (m, k, n) tile and its backward pass: the
 * formulas and the split-axis passes of kernels/cpu/norm.c, which computes the same.
 * With K values along the whole axis:
 *   mean = Σ_j x / K,  var = Σ_j (x − mean)² / K,  r = 1/√(var + eps),
 *   y = (x − mean)·r·gamma[j] + bias[j]
 *   dx = r·(g − mean_j g − xhat·mean_j(g·xhat)) + beta·dx,
 *        xhat = (x − mean)·r,  g = dy·gamma[j]
 *   dgamma[j] = Σ_{i,l} dy·xhat,  dbias[j] = Σ_{i,l} dy  (each + its own beta·itself)
 * Sums in nl_acc (double where the device has it, kernels/formula.h). Every pass but
 * layer_norm_tile is a formula of the codelet table (generated: axis launches, or one work
 * item per value). y may be x: each value is read and written by one work item. */

/* The whole forward of a tile holding the full axis: mean, inv_std, then y */
__kernel void nl_layer_norm_tile(long m, long k, long n, float eps, __global const float *x,
                                 __global const float *gamma, __global const float *bias,
                                 __global float *y, __global float *mean,
                                 __global float *inv_std)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    float inv_k = 1.0f / (float)k;
    nl_acc acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) acc += x[nl_at(p, k, n, j)];
    float mu = (float)(inv_k * nl_sum_y(red, p, acc));
    acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        nl_acc d = (nl_acc)x[nl_at(p, k, n, j)] - mu;
        acc += d * d;
    }
    float r = (float)(1 / sqrt(inv_k * nl_sum_y(red, p, acc) + eps));
    if (p.on && p.ly == 0) {
        mean[p.e] = mu;
        inv_std[p.e] = r;
    }
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        y[at] = (x[at] - mu) * r * gamma[j] + bias[j];
    }
}
