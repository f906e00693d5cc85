/* float32 <-> bfloat16 (the upper 16 bits of a float32), as kernels/cpu/bf16.c: widening
 * is exact; narrowing rounds to nearest, ties to even; a NaN stays a NaN (quieted); a
 * finite value above bf16's largest rounds to infinity. */
#include "common.cuh"

__global__ static void f32_to_bf16(int64_t n, const float *x, uint16_t *y)
{
    NL_CU_FOR(i, n) {
        uint32_t u = __float_as_uint(x[i]);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t quiet_nan = (u >> 16) | 0x40u;
        y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    }
}

const char *nl_cu_f32_to_bf16(cudaStream_t stream, int64_t n, const float *x, uint16_t *y)
{
    NL_CU_LAUNCH(f32_to_bf16, n, stream, n, x, y);
}

__global__ static void bf16_to_f32(int64_t n, const uint16_t *x, float *y)
{
    NL_CU_FOR(i, n) y[i] = __uint_as_float((uint32_t)x[i] << 16);
}

const char *nl_cu_bf16_to_f32(cudaStream_t stream, int64_t n, const uint16_t *x, float *y)
{
    NL_CU_LAUNCH(bf16_to_f32, n, stream, n, x, y);
}
