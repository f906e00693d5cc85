/* Layer normalisation along an axis of an (m, k, n) tile and its backward pass: the
 * formulas and the split-axis passes of kernels/cpu/norm.c, which computes the same.
 * With K values along the whole axis:
 *   mean = Σ_j x / K,  var = Σ_j (x − mean)² / K,  r = 1/√(var + eps),
 *   y = (x − mean)·r·gamma[j] + bias[j]
 *   dx = r·(g − mean_j g − xhat·mean_j(g·xhat)) + beta·dx,
 *        xhat = (x − mean)·r,  g = dy·gamma[j]
 *   dgamma[j] = Σ_{i,l} dy·xhat,  dbias[j] = Σ_{i,l} dy  (each + its own beta·itself)
 * Sums in nl_acc (double where the device has it, kernels/formula.h). The passes that
 * write a whole tile one value at a time (apply, backward_dx) are formulas of the codelet
 * table (generated); the others are axis launches (axis.clh). y may be x: each value is
 * read and written by one work item. */

/* acc = alpha · Σ_j (x − mean)² + beta · s;  s = finish ? 1/√(acc + eps) : acc */
__kernel void nl_layer_norm_invstd(long m, long k, long n, float alpha, float beta, float eps,
                                   int finish, __global const float *x,
                                   __global const float *mean, __global float *s)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc mu = p.on ? mean[p.e] : 0.0f, acc = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        nl_acc d = x[nl_at(p, k, n, j)] - mu;
        acc += d * d;
    }
    acc = nl_sum_y(red, p, acc);
    if (!p.on || p.ly) return;
    nl_acc v = alpha * acc + (beta == 0.0f ? (nl_acc)0 : (nl_acc)beta * s[p.e]);
    s[p.e] = (float)(finish ? 1 / sqrt(v + eps) : v);
}

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

/* a1 = Σ_j g,  a2 = Σ_j g·xhat  of this item's column, for every item of it */
static inline void nl_ln_sums(__local nl_acc *red, nl_pos p, long k, long n,
                              __global const float *x, __global const float *dy,
                              __global const float *gamma, nl_acc mu, nl_acc r, nl_acc *a1,
                              nl_acc *a2)
{
    nl_acc s1 = 0, s2 = 0;
    for (long j = p.ly; p.on && j < k; j += p.ny) {
        long at = nl_at(p, k, n, j);
        nl_acc g = (nl_acc)dy[at] * gamma[j];
        s1 += g;
        s2 += g * ((x[at] - mu) * r);
    }
    *a1 = nl_sum_y(red, p, s1);
    *a2 = nl_sum_y(red, p, s2);
}

/* dx at `at` (axis position j) = r·(g − s1 − xhat·s2) + beta·dx */
static inline void nl_ln_dx(long at, long j, float beta, __global const float *x,
                            __global const float *dy, __global const float *gamma, nl_acc mu,
                            nl_acc r, nl_acc s1, nl_acc s2, __global float *dx)
{
    nl_acc xhat = (x[at] - mu) * r, g = (nl_acc)dy[at] * gamma[j];
    float v = (float)(r * (g - s1 - xhat * s2));
    dx[at] = beta == 0.0f ? v : v + beta * dx[at];
}

/* sums (2·m·n values) = alpha·(mean_j g, then mean_j g·xhat) + beta·sums */
__kernel void nl_layer_norm_backward_sums(long m, long k, long n, float alpha, float beta,
                                          __global const float *x, __global const float *dy,
                                          __global const float *gamma,
                                          __global const float *mean,
                                          __global const float *inv_std, __global float *sums)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc a1, a2;
    nl_ln_sums(red, p, k, n, x, dy, gamma, p.on ? mean[p.e] : 0.0f,
               p.on ? inv_std[p.e] : 0.0f, &a1, &a2);
    if (!p.on || p.ly) return;
    __global float *s1 = sums + p.e, *s2 = s1 + m * n;
    *s1 = nl_axpby_acc(alpha, a1, beta, s1);
    *s2 = nl_axpby_acc(alpha, a2, beta, s2);
}

/* dx of a tile holding the full axis: the sums, then dx */
__kernel void nl_layer_norm_backward_tile(long m, long k, long n, float beta,
                                          __global const float *x, __global const float *dy,
                                          __global const float *gamma,
                                          __global const float *mean,
                                          __global const float *inv_std, __global float *dx)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n);
    nl_acc mu = p.on ? mean[p.e] : 0.0f, r = p.on ? inv_std[p.e] : 0.0f, a1, a2;
    nl_ln_sums(red, p, k, n, x, dy, gamma, mu, r, &a1, &a2);
    a1 /= k;
    a2 /= k;
    for (long j = p.ly; p.on && j < k; j += p.ny)
        nl_ln_dx(nl_at(p, k, n, j), j, beta, x, dy, gamma, mu, r, a1, a2, dx);
}

/* dgamma[j] = Σ_{i,l} dy·xhat + beta_gamma·dgamma[j]
 * dbias[j]  = Σ_{i,l} dy      + beta_bias·dbias[j]
 * launched as sum_fiber is (axis.cl) */
__kernel void nl_layer_norm_backward_fiber(long m, long k, long n, float beta_gamma,
                                           float beta_bias, __global const float *x,
                                           __global const float *dy,
                                           __global const float *mean,
                                           __global const float *inv_std,
                                           __global float *dgamma, __global float *dbias)
{
    __local nl_acc red[NL_WG];
    nl_pos p = nl_axis_pos(n == 1 ? k : 1);
    long j = n == 1 ? p.l : p.i;
    nl_acc ag = 0, ab = 0;
    for (long t = p.ly; p.on && t < m * n; t += p.ny) {
        long i = t / n, l = t % n, at = (i * k + j) * n + l, e = i * n + l;
        nl_acc d = dy[at];
        ab += d;
        ag += d * ((x[at] - (nl_acc)mean[e]) * inv_std[e]);
    }
    ag = nl_sum_y(red, p, ag);
    ab = nl_sum_y(red, p, ab);
    if (!p.on || p.ly) return;
    dgamma[j] = nl_axpby_acc(1.0f, ag, beta_gamma, dgamma + j);
    dbias[j] = nl_axpby_acc(1.0f, ab, beta_bias, dbias + j);
}
