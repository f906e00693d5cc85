/* Broadcasts along an axis of an (m, k, n) tile (kernels/cpu/axis.h): element (i, j, l)
 * at (i*k + j)*n + l, a slice value s[i*n + l], a fiber value f[j]. One work item per
 * element of x (m·k·n of them). beta == 0 overwrites x without reading it. */

__kernel void nl_add_slice(long m, long k, long n, float alpha, float beta,
                           __global const float *s, __global float *x)
{
    long id = get_global_id(0);
    if (id >= m * k * n) return;
    float v = alpha * s[id / (k * n) * n + id % n];
    x[id] = beta == 0.0f ? v : v + beta * x[id];
}

__kernel void nl_mul_slice(long m, long k, long n, __global const float *s,
                           __global float *x)
{
    long id = get_global_id(0);
    if (id < m * k * n) x[id] *= s[id / (k * n) * n + id % n];
}

__kernel void nl_add_fiber(long m, long k, long n, float alpha, float beta,
                           __global const float *f, __global float *x)
{
    long id = get_global_id(0);
    if (id >= m * k * n) return;
    float v = alpha * f[id / n % k];
    x[id] = beta == 0.0f ? v : v + beta * x[id];
}

__kernel void nl_mul_fiber(long m, long k, long n, __global const float *f, __global float *x)
{
    long id = get_global_id(0);
    if (id < m * k * n) x[id] *= f[id / n % k];
}
