/* Layout kernels on one tile (kernels/cpu/layout.c): causal mask and axis permutation,
 * one work item per value. */

/* x (batch × m × n, C order), rows from global row row0, columns from col0:
 * x[b, i, j] = value where col0 + j > row0 + i */
__kernel void nl_mask_causal(long batch, long m, long n, long row0, long col0, float value,
                             __global float *x)
{
    long id = get_global_id(0);
    if (id >= batch * m * n) return;
    long i = id / n % m, j = id % n;
    if (col0 + j > row0 + i) x[id] = value;
}

/* y (C order, n0 × … × n5) takes y[a, b, c, d, e, f] = x[a·s0 + b·s1 + … + f·s5] */
__kernel void nl_permute(long n0, long n1, long n2, long n3, long n4, long n5, long s0,
                         long s1, long s2, long s3, long s4, long s5,
                         __global const float *x, __global float *y)
{
    long id = get_global_id(0);
    if (id >= n0 * n1 * n2 * n3 * n4 * n5) return;
    long rest = id, src = 0;
    src += rest % n5 * s5; rest /= n5;
    src += rest % n4 * s4; rest /= n4;
    src += rest % n3 * s3; rest /= n3;
    src += rest % n2 * s2; rest /= n2;
    src += rest % n1 * s1; rest /= n1;
    src += rest * s0;
    y[id] = x[src];
}
