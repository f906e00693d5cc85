/* What a formula of the codelet table may call (kernels/codelets.py, ``formula=``), written
 * once for the three back ends that compile the kernels generated from the formulas
 * (kernels/formulas.py): C (kernels/cpu/formulas.c), OpenCL C (the program every OpenCL
 * device compiles, which starts with this file) and CUDA (kernels/cuda/formulas.cu).
 *
 * Each back end's own spelling is chosen here, once:
 *   nl_exp, nl_sqrt, nl_fabs   float exp, sqrt, |x|: C uses the vectorisable nl_expf of
 *                              cpu/fastexp.h (libm's expf keeps gcc from vectorising a loop),
 *                              OpenCL its exp, CUDA expf
 *   nl_acc                     the type sums are kept in: double (OpenCL: where the device
 *                              has it, else float); sqrt of an nl_acc is spelt sqrt in all
 *   int64_t, int32_t, uint32_t, uint16_t  OpenCL C spells them long, int, uint, ushort
 * and the helpers below are plain functions of floats, the same text in all three. */
#ifndef NL_FORMULA_H
#define NL_FORMULA_H

#if defined(__OPENCL_VERSION__)
#define NL_FN static inline
typedef long int64_t;
typedef int int32_t;
typedef uint uint32_t;
typedef ushort uint16_t;
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double nl_acc;
#else
typedef float nl_acc;
#endif
#define nl_exp(x) exp(x)
#define nl_sqrt(x) sqrt(x)
#define nl_fabs(x) fabs(x)
#define nl_float_bits(x) as_uint(x)
#define nl_bits_float(u) as_float(u)

#elif defined(__CUDACC__) || defined(NL_CU_EMULATE)   /* after common.cuh */
#define NL_FN __device__ static inline
typedef double nl_acc;
#define nl_exp(x) expf(x)
#define nl_sqrt(x) sqrtf(x)
#define nl_fabs(x) fabsf(x)
#define nl_float_bits(x) __float_as_uint(x)
#define nl_bits_float(u) __uint_as_float(u)

#else   /* C */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/fastexp.h"
#define NL_FN static inline
typedef double nl_acc;
#define nl_exp(x) nl_expf(x)
#define nl_sqrt(x) sqrtf(x)
#define nl_fabs(x) fabsf(x)
NL_FN uint32_t nl_float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
NL_FN float nl_bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
#endif

/* ---- bfloat16: the upper 16 bits of an IEEE float32 ----------------------------------
 * Narrowing rounds to nearest, ties to even, as PyTorch, ml_dtypes and AVX-512's
 * vcvtneps2bf16 do; a NaN stays a NaN (quieted: its payload's top bit set, so that the
 * rounding cannot carry it into an infinity); a finite value above bf16's largest
 * (3.3895e38) rounds to infinity. Widening is exact. Integer selects only, no branch: the
 * loops around them vectorise at full width on AVX2 and AVX-512 alike. */
NL_FN uint16_t nl_bf16_round(float x)
{
    uint32_t u = nl_float_bits(x);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

NL_FN float nl_bf16_widen(uint16_t h)
{
    return nl_bits_float((uint32_t)h << 16);
}

/* ---- σ(x) = 1/(1 + e^−x) and 1 − σ(x), from e = e^−|x| -------------------------------
 * Nothing overflows and neither σ nor 1 − σ cancels:
 *   σ(x) = 1/(1 + e) for x ≥ 0, e/(1 + e) for x < 0 */
NL_FN void nl_sigmoid(float x, float *s, float *one_minus_s)
{
    float e = nl_exp(-nl_fabs(x)), r = 1.0f / (1.0f + e);
    *s = x >= 0 ? r : e * r;
    *one_minus_s = x >= 0 ? e * r : r;
}

/* σ(2u) and 1 − σ(2u) (GELU's), from e = e^−2|u| */
NL_FN void nl_sigmoid2(float u, float *s, float *one_minus_s)
{
    float e = nl_exp(-2.0f * nl_fabs(u)), r = 1.0f / (1.0f + e);
    *s = u >= 0 ? r : e * r;
    *one_minus_s = u >= 0 ? e * r : r;
}

/* ---- GELU, tanh approximation (GPT-2) -------------------------------------------------
 * In the sigmoid form, which keeps the tiny negative tail accurate (1 + tanh u = 2σ(2u),
 * no cancellation):
 *   y  = x/2 · (1 + tanh u) = x · σ(2u),   u = √(2/π)·(x + 0.044715·x³)
 *   dy/dx = σ(2u) + 2x · σ(2u)·(1 − σ(2u)) · √(2/π)·(1 + 3·0.044715·x²) */
#define NL_SQRT_2_PI 0.7978845608028654f
#define NL_GELU_C 0.044715f

NL_FN float nl_gelu_value(float v)
{
    float s, q;
    nl_sigmoid2(NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
    return v * s;
}

NL_FN float nl_gelu_derivative(float v)
{
    float s, q;
    nl_sigmoid2(NL_SQRT_2_PI * (v + NL_GELU_C * v * v * v), &s, &q);
    return s + 2.0f * v * s * q * NL_SQRT_2_PI * (1.0f + 3.0f * NL_GELU_C * v * v);
}

#endif
