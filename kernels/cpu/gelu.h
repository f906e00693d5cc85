/* GELU, tanh approximation (GPT-2), shared by the float32 kernels (elementwise.c) and the
 * bf16-storage ones (gelu_bf16.c), so both compute the same values. The sigmoid form keeps
 * the tiny negative tail accurate (1 + tanh u = 2σ(2u), no cancellation):
 *   y  = x/2 · (1 + tanh u) = x · σ(2u),   u = √(2/π)·(x + 0.044715·x³)
 *   dy/dx = σ(2u) + 2x · σ(2u)·(1 − σ(2u)) · √(2/π)·(1 + 3·0.044715·x²) */
#ifndef NL_GELU_H
#define NL_GELU_H
#include <math.h>

#include "fastexp.h"

static const float k_sqrt_2_pi = 0.7978845608028654f, k_c = 0.044715f;

/* s = σ(2u) and 1 − s, each without overflow or cancellation */
static inline void sigmoid2(float u, float *s, float *one_minus_s)
{
    float e = nl_expf(-2.0f * fabsf(u)), r = 1.0f / (1.0f + e);
    *s = u >= 0 ? r : e * r;
    *one_minus_s = u >= 0 ? e * r : r;
}

static inline float nl_gelu_value(float v)
{
    float s, q;
    sigmoid2(k_sqrt_2_pi * (v + k_c * v * v * v), &s, &q);
    return v * s;
}

static inline float nl_gelu_derivative(float v)
{
    float s, q;
    sigmoid2(k_sqrt_2_pi * (v + k_c * v * v * v), &s, &q);
    return s + 2.0f * v * s * q * k_sqrt_2_pi * (1.0f + 3.0f * k_c * v * v);
}
#endif
