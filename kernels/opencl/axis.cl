/* The reductions along an axis of an (m, k, n) tile that are not sums (kernels/cpu/axis.c
 * computes the same): axis launches (axis.clh). The sums along an axis and the broadcasts
 * are formulas of the codelet table: generated. */

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], max_j x[i,j,l]) when accumulate.
 * -inf entries are ordinary values; a NaN wins, so it is not silently dropped. */
__kernel void nl_max_slice(long m, long k, long n, int accumulate, __global const float *x,
                           __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    float mx = -INFINITY;
    for (long j = p.ly; p.on && j < k; j += p.ny) mx = nl_max_nan(mx, x[nl_at(p, k, n, j)]);
    mx = nl_max_y(red, p, mx);
    if (p.on && p.ly == 0 && (!accumulate || (mx > s[p.e]) | (mx != mx))) s[p.e] = mx;
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]  (one work-group: the launch (1, n, 1)) */
__kernel void nl_sumsq_all(long n, float alpha, float beta, __global const float *x,
                           __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(1);
    nl_acc acc = 0;
    for (long i = p.ly; i < n; i += p.ny) {
        nl_acc v = x[i];
        acc += v * v;
    }
    acc = nl_sum_y(red, p, acc);
    if (p.ly == 0) s[0] = nl_axpby_acc(alpha, acc, beta, s);
}
