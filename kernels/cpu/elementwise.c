/* Element-wise kernels on n contiguous values. Backward sits beside forward. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "fastexp.h"
#include "gelu.h"

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

/* GELU: gelu.h (its formulas, shared with gelu_bf16.c)
 * backward: dx[i] = dy[i]·gelu'(x[i]) + beta·dx[i] */
void nl_gelu(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = nl_gelu_value(x[i]);
}

void nl_gelu_backward(int64_t n, float beta, const float *x, const float *dy, float *dx)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * nl_gelu_derivative(x[i]) + (beta == 0.0f ? 0.0f : beta * dx[i]);
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
