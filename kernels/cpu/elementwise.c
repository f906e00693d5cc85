/* Element-wise kernels on n contiguous values. Backward sits beside forward. */
#include <math.h>
#include <stdint.h>

/* y[i] = value */
void nl_fill(int64_t n, float value, float *y)
{
    for (int64_t i = 0; i < n; i++) y[i] = value;
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

/* GELU, tanh approximation (GPT-2):
 *   y  = x/2 · (1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
 *   dy/dx = (1 + tanh u)/2 + x/2 · (1 - tanh²u) · √(2/π)·(1 + 3·0.044715·x²)
 * backward: dx[i] = dy[i]·gelu'(x[i]) + beta·dx[i] */
static const float k_sqrt_2_pi = 0.7978845608028654f, k_c = 0.044715f;

void nl_gelu(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(k_sqrt_2_pi * (v + k_c * v * v * v)));
    }
}

void nl_gelu_backward(int64_t n, float beta, const float *x, const float *dy, float *dx)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], t = tanhf(k_sqrt_2_pi * (v + k_c * v * v * v));
        float g = 0.5f * (1.0f + t)
                  + 0.5f * v * (1.0f - t * t) * k_sqrt_2_pi * (1.0f + 3.0f * k_c * v * v);
        dx[i] = dy[i] * g + (beta == 0.0f ? 0.0f : beta * dx[i]);
    }
}
