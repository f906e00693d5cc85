/* Softmax along an axis of an (m, k, n) tile and its backward pass: the formulas and the
 * split-axis passes of kernels/cpu/softmax.c, which computes the same.
 *   y = exp(x − max_j x) / Σ_j exp(x − max_j x)
 *   dx = y ⊙ (dy − s) + beta·dx,  s = Σ_j dy ⊙ y / Σ_j y
 * Sums in nl_acc (double where the device has it, kernels/formula.h); exp is OpenCL's
 * float exp. The passes that reduce (sumexp, backward_sums, and the *_tile kernels, which
 * reduce then write) are axis launches (axis.clh); those that write a whole tile one value
 * at a time (apply, backward) are formulas of the codelet table: generated. y may be x,
 * and dx y or dy: each value is read and written by one work item. */

/* s[i,l] = Σ_j exp(x[i,j,l] − mx[i,l]) + beta · s[i,l] */
__kernel void nl_softmax_sumexp(long m, long k, long n, float beta, __global const float *x,
                                __global const float *mx, __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc acc = 0;
    float mv = p.on ? mx[p.e] : 0.0f;
    for (long j = p.ly; p.on && j < k; j += p.ny) acc += exp(x[nl_at(p, k, n, j)] - mv);
    acc = nl_sum_y(red, p, acc);
    if (p.on && p.ly == 0) s[p.e] = nl_axpby_acc(1.0f, acc, beta, s + p.e);
}

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

/* Σ_j dy ⊙ y and Σ_j y of this item's column, for every item of it */
static inline void nl_softmax_sums(__local nl_acc *red, nl_pos p, long k, long n,
                                   __global const float *y, __global const float *dy,
                                   nl_acc *sdy, nl_acc *sy)
{
    nl_acc a = 0, b = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        a += (nl_acc)dy[at] * y[at];
        b += y[at];
    }
    *sdy = nl_sum_y(red, p, a);
    *sy = nl_sum_y(red, p, b);
}

/* Σ_j dy ⊙ y and Σ_j y (+ themselves when accumulate) as float pairs hi + lo (~48 bits:
 * softmax.c says why): sums holds four blocks of m·n values, hi and lo of the first sum,
 * then of the second */
__kernel void nl_softmax_backward_sums(long m, long k, long n, int accumulate,
                                       __global const float *y, __global const float *dy,
                                       __global float *sums)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc acc[2];
    nl_softmax_sums(red, p, k, n, y, dy, &acc[0], &acc[1]);
    if (!p.on || p.ly) return;
    long mn = m * n;
    for (int b = 0; b < 2; b++) {
        __global float *hi = sums + 2 * b * mn + p.e, *lo = hi + mn;
        nl_acc v = acc[b] + (accumulate ? (nl_acc)*hi + *lo : (nl_acc)0);
        *hi = (float)v;
        *lo = (float)(v - *hi);
    }
}

/* The whole backward of a tile holding the full axis: the sums, then dx */
__kernel void nl_softmax_backward_tile(long m, long k, long n, float beta,
                                       __global const float *y, __global const float *dy,
                                       __global float *dx)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc sdy, sy;
    nl_softmax_sums(red, p, k, n, y, dy, &sdy, &sy);
    nl_acc s = sdy / sy;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        float v = (float)(y[at] * (dy[at] - s));
        dx[at] = beta == 0.0f ? v : v + beta * dx[at];
    }
}
