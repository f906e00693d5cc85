/* float32 <-> bfloat16. A bf16 is the upper 16 bits of an IEEE float32 (sign, the 8
 * exponent bits, 7 mantissa bits): widening is exact, a shift; narrowing rounds to
 * nearest, ties to even, as PyTorch, ml_dtypes and the AVX-512 BF16 instruction
 * vcvtneps2bf16 do. A NaN stays a NaN (quieted: its payload's top bit set, so that the
 * rounding cannot carry it into an infinity); a finite value above bf16's largest
 * (3.3895e38) rounds to infinity.
 *
 * Written on integers with a select, no branch and no intrinsic, so that gcc vectorises
 * both loops at full width on AVX2 and AVX-512 alike (tests/ops/test_bf16.py checks the
 * assembly). */
#include "prototypes.h"
#include <stdint.h>
#include <string.h>

void nl_f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t quiet_nan = (u >> 16) | 0x40u;
        y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    }
}

void nl_bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(y + i, &u, sizeof u);
    }
}
