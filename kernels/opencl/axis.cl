/* Reductions along an axis of an (m, k, n) tile (kernels/cpu/axis.c computes the same):
 * axis launches (axis.clh), one work-group column per slice entry. beta == 0 overwrites
 * the output without reading it. The broadcasts (add_slice, mul_fiber, ...) are formulas
 * of the codelet table: generated. */

/* s[i,l] = alpha · Σ_j x[i,j,l] + beta · s[i,l] */
__kernel void nl_sum_slice(long m, long k, long n, float alpha, float beta,
                           __global const float *x, __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) acc += x[nl_at(p, k, n, j)];
    acc = nl_sum_y(red, p, acc);
    if (p.on && p.ly == 0) s[p.e] = nl_axpby_acc(alpha, acc, beta, s + p.e);
}

/* s[i,l] = alpha · Σ_j x[i,j,l]² + beta · s[i,l] */
__kernel void nl_sumsq_slice(long m, long k, long n, float alpha, float beta,
                             __global const float *x, __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        nl_acc v = x[nl_at(p, k, n, j)];
        acc += v * v;
    }
    acc = nl_sum_y(red, p, acc);
    if (p.on && p.ly == 0) s[p.e] = nl_axpby_acc(alpha, acc, beta, s + p.e);
}

/* s[i,l] = alpha · Σ_j a[i,j,l]·b[i,j,l] + beta · s[i,l] */
__kernel void nl_sumprod_slice(long m, long k, long n, float alpha, float beta,
                               __global const float *a, __global const float *b,
                               __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        acc += (nl_acc)a[at] * b[at];
    }
    acc = nl_sum_y(red, p, acc);
    if (p.on && p.ly == 0) s[p.e] = nl_axpby_acc(alpha, acc, beta, s + p.e);
}

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

/* f[j] = alpha · Σ_{i,l} x[i,j,l] + beta · f[j].
 * Launched (launch.c: the row's opencl_axis) as k reductions of length m·n when n > 1
 * (the group of fiber entry j walks x[i, j, :] rows), as the slice sums of the (1, m, k)
 * view when n == 1 (x's rows run along the axis: nx neighbouring j per group) */
__kernel void nl_sum_fiber(long m, long k, long n, float alpha, float beta,
                           __global const float *x, __global float *f)
{
    __local nl_acc red[NL_WG];
    /* the fiber entry j of this item's column; the barriers stay out of the branches */
    nl_pos p = nl_axis_pos(n == 1 ? k : 1);
    long j = n == 1 ? p.l : p.i;
    nl_acc acc = 0;
    if (n == 1)
        for (long i = p.ly; p.on && i < m; i += p.ny) acc += x[i * k + j];
    else
        for (long t = p.ly; t < m * n; t += p.ny) acc += x[(t / n * k + j) * n + t % n];
    acc = nl_sum_y(red, p, acc);
    if (p.on && p.ly == 0) f[j] = nl_axpby_acc(alpha, acc, beta, f + j);
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
