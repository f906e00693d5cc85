/* One bf16 value each way, inline, for kernels that load or store bf16 tiles in their own
 * loops (the same rounding as nl_f32_to_bf16 in bf16.c: to nearest, ties to even, NaN
 * quieted; widening exact). Integer selects only, so the loops around them vectorise. */
#ifndef NL_BF16_H
#define NL_BF16_H
#include <stdint.h>
#include <string.h>

static inline uint16_t nl_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static inline float nl_bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
#endif
