/* A vectorisable exp shared by the kernels that sit on exp (softmax, cross-entropy,
 * GELU). */
#pragma once
#include <stdint.h>

/* exp(x) without a libm call, so the loops around it vectorise (glibc's expf
 * does not, here): x = k·ln2 + r with |r| ≤ ln2/2 (Cody–Waite, two-part ln2),
 * exp(r) by Cephes' degree-7 polynomial, 2^k from exponent bits. Error ≤ 1.5 ulp
 * (checked against exp() in double over every float in range); x < −87.34 (the
 * normal range's end, and -inf) gives 0; NaN stays NaN; for x ≤ 88 only, which
 * softmax's x − max ≤ 0 always is.
 * gcc turns the clamps below into branches with a constant side; merging them back
 * into a vector loop needs -fno-trapping-math (kernels/build.py, VALUE_SAFE) unless
 * the target has AVX-512's masked instructions: without it, AVX2 builds ran every loop
 * around this exp scalar (tests/test_bench_kernels.py checks the generated code). */
static inline float nl_expf(float x)
{
    const float lo = -87.33654f, hi = 88.0f;
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    float kf = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;  /* round(x/ln2): 1.5·2^23 */
    float r = xc - kf * 0.693359375f - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } two_k = {.i = ((int32_t)kf + 127) << 23};
    union { float f; int32_t i; } res = {.f = p * two_k.f};
    res.i &= -(int32_t)!(x < lo);  /* a mask, not a branch: the loop stays vectorisable */
    return res.f;
}
