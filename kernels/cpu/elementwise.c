/* Element-wise kernels on n contiguous values. Backward sits beside forward. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "fastexp.h"

/* y[i] = value */
void nl_fill(int64_t n, float value, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = value;
}

void nl_fill_after(int64_t n, float value, const float *after, float *y)
{
    (void)after;   /* only orders the task */
    nl_fill(n, value, y);
}

void nl_fill_i64(int64_t n, int64_t value, int64_t *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = value;
}

/* y[i] = x[i] */
void nl_copy(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
}

void nl_copy_i64(int64_t n, const int64_t *x, int64_t *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
}

/* y[i] = alpha*x[i] + beta*y[i]; beta == 0 overwrites y without reading it (BLAS rule) */
void nl_axpby(int64_t n, float alpha, float beta, const float *x, float *y)
{
    if (beta == 0.0f)
        for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i] + beta * y[i];
}

/* y[i] = alpha*x[i] */
void nl_scale(int64_t n, float alpha, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = alpha * x[i];
}

/* y[i] = alpha*a[i]*b[i] */
void nl_mul(int64_t n, float alpha, const float *a, const float *b, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = alpha * a[i] * b[i];
}

/* GELU, tanh approximation (GPT-2), in the sigmoid form that keeps its tiny
 * negative tail accurate (1 + tanh u = 2σ(2u), no cancellation):
 *   y  = x/2 · (1 + tanh u) = x · σ(2u),   u = √(2/π)·(x + 0.044715·x³)
 *   dy/dx = σ(2u) + 2x · σ(2u)·(1 − σ(2u)) · √(2/π)·(1 + 3·0.044715·x²)
 * backward: dx[i] = dy[i]·gelu'(x[i]) + beta·dx[i] */
static const float k_sqrt_2_pi = 0.7978845608028654f, k_c = 0.044715f;

/* s = σ(2u) and 1 − s, each without overflow or cancellation */
static inline void sigmoid2(float u, float *s, float *one_minus_s)
{
    float e = nl_expf(-2.0f * fabsf(u)), r = 1.0f / (1.0f + e);
    *s = u >= 0 ? r : e * r;
    *one_minus_s = u >= 0 ? e * r : r;
}

void nl_gelu(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], s, q;
        sigmoid2(k_sqrt_2_pi * (v + k_c * v * v * v), &s, &q);
        y[i] = v * s;
    }
}

void nl_gelu_backward(int64_t n, float beta, const float *x, const float *dy, float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], s, q;
        sigmoid2(k_sqrt_2_pi * (v + k_c * v * v * v), &s, &q);
        float g = s + 2.0f * v * s * q * k_sqrt_2_pi * (1.0f + 3.0f * k_c * v * v);
        dx[i] = dy[i] * g + (beta == 0.0f ? 0.0f : beta * dx[i]);
    }
}

/* ReLU: out = x < 0 ? 0 : x (NaN stays NaN: the comparison is false for it)
 * backward: dx[i] = (x[i] > 0 ? dy[i] : 0) + beta·dx[i]; the derivative at 0 is 0, as
 * PyTorch takes it; beta == 0 overwrites dx without reading it */
void nl_relu(int64_t n, const float *x, float *out)
{
    for (int64_t i = 0; i < n; i++) out[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void nl_relu_backward(int64_t n, float beta, const float *x, const float *dy, float *dx)
{
    if (beta == 0.0f)
        for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    else
        for (int64_t i = 0; i < n; i++) dx[i] = (x[i] > 0.0f ? dy[i] : 0.0f) + beta * dx[i];
}

/* SiLU (swish): out = x·σ(x), σ(x) = 1/(1 + e^−x), from e = e^−|x| so that nothing
 * overflows and neither σ nor 1 − σ cancels:
 *   σ(x) = 1/(1 + e) for x ≥ 0, e/(1 + e) for x < 0
 *   dy/dx = σ(x) + x·σ(x)·(1 − σ(x)) = σ(x)·(1 + x·(1 − σ(x)))
 * backward: dx[i] = dy[i]·silu'(x[i]) + beta·dx[i] */
static inline void sigmoid(float x, float *s, float *one_minus_s)
{
    float e = nl_expf(-fabsf(x)), r = 1.0f / (1.0f + e);
    *s = x >= 0 ? r : e * r;
    *one_minus_s = x >= 0 ? e * r : r;
}

void nl_silu(int64_t n, const float *x, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        float s, q;
        sigmoid(x[i], &s, &q);
        out[i] = x[i] * s;
    }
}

void nl_silu_backward(int64_t n, float beta, const float *x, const float *dy, float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], s, q;
        sigmoid(v, &s, &q);
        dx[i] = dy[i] * (s * (1.0f + v * q)) + (beta == 0.0f ? 0.0f : beta * dx[i]);
    }
}
