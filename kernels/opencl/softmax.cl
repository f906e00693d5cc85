/* Softmax along an axis of an (m, k, n) tile and its backward pass: the formulas and the
 * split-axis passes of kernels/cpu/softmax.c, which computes the same.
 *   y = exp(x − max_j x) / Σ_j exp(x − max_j x)
 *   dx = y ⊙ (dy − s) + beta·dx,  s = Σ_j dy ⊙ y / Σ_j y
 * Sums in nl_acc (double where the device has it, kernels/formula.h); exp is OpenCL's
 * float exp. Every pass but softmax_tile (a max, then sums: an axis launch, axis.clh) is a
 * formula of the codelet table: generated. y may be x: each value is read and written by
 * one work item. */

/* The whole softmax of a tile holding the full axis: max, then y = exp(x − max) while
 * summing it, then y /= sum (each item rescales the values it wrote) */
__kernel void nl_softmax_tile(long m, long k, long n, __global const float *x,
                              __global float *y)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    float mx = -INFINITY;
    for (long j = p.ly; p.on && j < k; j += p.ny) mx = nl_max_nan(mx, x[nl_at(p, k, n, j)]);
    mx = nl_max_y(red, p, mx);
    nl_acc acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        float v = exp(x[at] - mx);
        y[at] = v;
        acc += v;
    }
    float r = (float)(1.0f / nl_sum_y(red, p, acc));
    for (long j = p.ly; p.on && j < k; j += p.ny) y[nl_at(p, k, n, j)] *= r;
}
