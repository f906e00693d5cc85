/* Element-wise kernels on n contiguous values: the formulas of kernels/cpu/elementwise.c,
 * one thread per value. beta == 0 overwrites the output without reading it (BLAS rule:
 * it may be uninitialised). */
#include "common.cuh"

__global__ static void fill(int64_t n, float value, float *y)
{
    NL_CU_FOR(i, n) y[i] = value;
}

const char *nl_cu_fill(cudaStream_t stream, int64_t n, float value, float *y)
{
    NL_CU_LAUNCH(fill, n, stream, n, value, y);
}

const char *nl_cu_fill_after(cudaStream_t stream, int64_t n, float value, const float *after,
                             float *y)
{
    (void)after;   /* only orders the task */
    NL_CU_LAUNCH(fill, n, stream, n, value, y);
}

__global__ static void fill_i64(int64_t n, int64_t value, int64_t *y)
{
    NL_CU_FOR(i, n) y[i] = value;
}

const char *nl_cu_fill_i64(cudaStream_t stream, int64_t n, int64_t value, int64_t *y)
{
    NL_CU_LAUNCH(fill_i64, n, stream, n, value, y);
}

template <typename T> __global__ static void copy(int64_t n, const T *x, T *y)
{
    NL_CU_FOR(i, n) y[i] = x[i];
}

const char *nl_cu_copy(cudaStream_t stream, int64_t n, const float *x, float *y)
{
    NL_CU_LAUNCH(copy<float>, n, stream, n, x, y);
}

const char *nl_cu_copy_i64(cudaStream_t stream, int64_t n, const int64_t *x, int64_t *y)
{
    NL_CU_LAUNCH(copy<int64_t>, n, stream, n, x, y);
}

/* y = alpha·x + beta·y */
__global__ static void axpby(int64_t n, float alpha, float beta, const float *x, float *y)
{
    NL_CU_FOR(i, n) y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

const char *nl_cu_axpby(cudaStream_t stream, int64_t n, float alpha, float beta,
                        const float *x, float *y)
{
    NL_CU_LAUNCH(axpby, n, stream, n, alpha, beta, x, y);
}

/* y = alpha·x */
__global__ static void scale(int64_t n, float alpha, const float *x, float *y)
{
    NL_CU_FOR(i, n) y[i] = alpha * x[i];
}

const char *nl_cu_scale(cudaStream_t stream, int64_t n, float alpha, const float *x, float *y)
{
    NL_CU_LAUNCH(scale, n, stream, n, alpha, x, y);
}

/* y = alpha·a·b */
__global__ static void mul(int64_t n, float alpha, const float *a, const float *b, float *y)
{
    NL_CU_FOR(i, n) y[i] = alpha * a[i] * b[i];
}

const char *nl_cu_mul(cudaStream_t stream, int64_t n, float alpha, const float *a,
                      const float *b, float *y)
{
    NL_CU_LAUNCH(mul, n, stream, n, alpha, a, b, y);
}

/* σ(t) and 1 − σ(t) from e = exp(−|t|): nothing overflows, neither cancels */
__device__ static inline void sigmoid(float t, float *s, float *one_minus_s)
{
    float e = expf(-fabsf(t)), r = 1.0f / (1.0f + e);
    *s = t >= 0 ? r : e * r;
    *one_minus_s = t >= 0 ? e * r : r;
}

/* GELU (tanh form) = x·σ(2u), u = √(2/π)·(x + 0.044715·x³)
 * gelu'(x) = σ(2u) + 2x·σ(2u)·(1 − σ(2u))·√(2/π)·(1 + 3·0.044715·x²) */
#define NL_SQRT_2_PI 0.7978845608028654f
#define NL_GELU_C 0.044715f

__global__ static void gelu(int64_t n, const float *x, float *y)
{
    NL_CU_FOR(i, n) {
        float v = x[i], s, q;
        sigmoid(2.0f * NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
        y[i] = v * s;
    }
}

const char *nl_cu_gelu(cudaStream_t stream, int64_t n, const float *x, float *out)
{
    NL_CU_LAUNCH(gelu, n, stream, n, x, out);
}

__global__ static void gelu_backward(int64_t n, float beta, const float *x, const float *dy,
                                     float *dx)
{
    NL_CU_FOR(i, n) {
        float v = x[i], s, q;
        sigmoid(2.0f * NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
        float g = s + 2.0f * v * s * q * NL_SQRT_2_PI * (1.0f + 3.0f * NL_GELU_C * v * v);
        dx[i] = dy[i] * g + (beta == 0.0f ? 0.0f : beta * dx[i]);
    }
}

const char *nl_cu_gelu_backward(cudaStream_t stream, int64_t n, float beta, const float *x,
                                const float *dy, float *dx)
{
    NL_CU_LAUNCH(gelu_backward, n, stream, n, beta, x, dy, dx);
}

/* ReLU: x < 0 ? 0 : x (NaN stays NaN); its derivative at 0 is 0, as PyTorch takes it */
__global__ static void relu(int64_t n, const float *x, float *y)
{
    NL_CU_FOR(i, n) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

const char *nl_cu_relu(cudaStream_t stream, int64_t n, const float *x, float *out)
{
    NL_CU_LAUNCH(relu, n, stream, n, x, out);
}

__global__ static void relu_backward(int64_t n, float beta, const float *x, const float *dy,
                                     float *dx)
{
    NL_CU_FOR(i, n) {
        float d = x[i] > 0.0f ? dy[i] : 0.0f;
        dx[i] = beta == 0.0f ? d : d + beta * dx[i];
    }
}

const char *nl_cu_relu_backward(cudaStream_t stream, int64_t n, float beta, const float *x,
                                const float *dy, float *dx)
{
    NL_CU_LAUNCH(relu_backward, n, stream, n, beta, x, dy, dx);
}

/* SiLU = x·σ(x);  silu'(x) = σ(x)·(1 + x·(1 − σ(x))) */
__global__ static void silu(int64_t n, const float *x, float *y)
{
    NL_CU_FOR(i, n) {
        float s, q;
        sigmoid(x[i], &s, &q);
        y[i] = x[i] * s;
    }
}

const char *nl_cu_silu(cudaStream_t stream, int64_t n, const float *x, float *out)
{
    NL_CU_LAUNCH(silu, n, stream, n, x, out);
}

__global__ static void silu_backward(int64_t n, float beta, const float *x, const float *dy,
                                     float *dx)
{
    NL_CU_FOR(i, n) {
        float v = x[i], s, q;
        sigmoid(v, &s, &q);
        dx[i] = dy[i] * (s * (1.0f + v * q)) + (beta == 0.0f ? 0.0f : beta * dx[i]);
    }
}

const char *nl_cu_silu_backward(cudaStream_t stream, int64_t n, float beta, const float *x,
                                const float *dy, float *dx)
{
    NL_CU_LAUNCH(silu_backward, n, stream, n, beta, x, dy, dx);
}
