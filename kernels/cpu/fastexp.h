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
 * around this exp scalar (tests/bench/test_kernels.py checks the generated code). */
/* The clamped argument's range reduction and polynomial, once for any float type T:
 * float for nl_expf, a GCC vector of 8 floats for the kernel benchmark's exp roof
 * (kernels/bench.c), which so runs exactly these operations. Returns exp(r) for
 * r = xc − kf·ln2, kf = round(xc/ln2) (1.5·2^23 rounds), leaving the 2^kf scaling. */
#define NL_EXP_REDUCED(T, name)                                                  \
    static inline T name(T xc, T *kf)                                            \
    {                                                                            \
        *kf = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;                    \
        T r = xc - *kf * 0.693359375f - *kf * -2.12194440e-4f;                   \
        T p = r * 1.9875691500e-4f + 1.3981999507e-3f;                           \
        p = p * r + 8.3334519073e-3f;                                            \
        p = p * r + 4.1665795894e-2f;                                            \
        p = p * r + 1.6666665459e-1f;                                            \
        p = p * r + 5.0000001201e-1f;                                            \
        return p * r * r + r + 1.0f;                                             \
    }
NL_EXP_REDUCED(float, nl_exp_reduced)

static inline float nl_expf(float x)
{
    const float lo = -87.33654f, hi = 88.0f;
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    float kf, p = nl_exp_reduced(xc, &kf);
    union { int32_t i; float f; } two_k = {.i = ((int32_t)kf + 127) << 23};
    union { float f; int32_t i; } res = {.f = p * two_k.f};
    res.i &= -(int32_t)!(x < lo);  /* a mask, not a branch: the loop stays vectorisable */
    return res.f;
}
