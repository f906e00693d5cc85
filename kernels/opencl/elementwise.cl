/* Element-wise kernels for the OpenCL worker: one work item per value, the same formulas
 * as kernels/cpu/elementwise.c (each kernel takes the row's scalar arguments, then its
 * buffers, as the C kernel does). The global size may exceed n: every kernel checks i < n.
 * OpenCL C: long is 64 bits, int 32. */

__kernel void nl_fill(long n, float value, __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = value;
}

__kernel void nl_fill_after(long n, float value, __global const float *after,
                            __global float *y)
{
    long i = get_global_id(0);   /* after only orders the task */
    if (i < n) y[i] = value;
}

__kernel void nl_fill_i64(long n, long value, __global long *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = value;
}

__kernel void nl_copy_i64(long n, __global const long *x, __global long *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = x[i];
}

__kernel void nl_copy(long n, __global const float *x, __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = x[i];
}

/* beta == 0 overwrites y without reading it (the BLAS rule: y may be uninitialised) */
__kernel void nl_axpby(long n, float alpha, float beta, __global const float *x,
                       __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

__kernel void nl_scale(long n, float alpha, __global const float *x, __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = alpha * x[i];
}

__kernel void nl_mul(long n, float alpha, __global const float *a, __global const float *b,
                     __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = alpha * a[i] * b[i];
}

/* GELU (tanh form) as σ(2u), u = √(2/π)·(x + 0.044715·x³): no cancellation in the
 * negative tail; s and 1 − s each computed without overflow (see the C kernel) */
#define NL_SQRT_2_PI 0.7978845608028654f
#define NL_GELU_C 0.044715f

static void nl_sigmoid2(float u, float *s, float *q)
{
    float e = exp(-2.0f * fabs(u)), r = 1.0f / (1.0f + e);
    *s = u >= 0.0f ? r : e * r;
    *q = u >= 0.0f ? e * r : r;
}

__kernel void nl_gelu(long n, __global const float *x, __global float *y)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float v = x[i], s, q;
    nl_sigmoid2(NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
    y[i] = v * s;
}

/* dx = dy·gelu'(x) + beta·dx, gelu'(x) = s + 2x·s·(1 − s)·√(2/π)·(1 + 3·0.044715·x²) */
__kernel void nl_gelu_backward(long n, float beta, __global const float *x,
                               __global const float *dy, __global float *dx)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float v = x[i], s, q;
    nl_sigmoid2(NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
    float d = s + 2.0f * v * s * q * NL_SQRT_2_PI * (1.0f + 3.0f * NL_GELU_C * v * v);
    dx[i] = beta == 0.0f ? dy[i] * d : dy[i] * d + beta * dx[i];
}

__kernel void nl_relu(long n, __global const float *x, __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

__kernel void nl_relu_backward(long n, float beta, __global const float *x,
                               __global const float *dy, __global float *dx)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float d = x[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = beta == 0.0f ? d : d + beta * dx[i];
}

/* SiLU: x·σ(x) from e = e^−|x| (no overflow, no cancellation in σ or 1 − σ) */
static void nl_sigmoid(float x, float *s, float *q)
{
    float e = exp(-fabs(x)), r = 1.0f / (1.0f + e);
    *s = x >= 0.0f ? r : e * r;
    *q = x >= 0.0f ? e * r : r;
}

__kernel void nl_silu(long n, __global const float *x, __global float *y)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float s, q;
    nl_sigmoid(x[i], &s, &q);
    y[i] = x[i] * s;
}

__kernel void nl_silu_backward(long n, float beta, __global const float *x,
                               __global const float *dy, __global float *dx)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float v = x[i], s, q;
    nl_sigmoid(v, &s, &q);
    float d = dy[i] * (s * (1.0f + v * q));
    dx[i] = beta == 0.0f ? d : d + beta * dx[i];
}
