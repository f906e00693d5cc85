/* Matrix products whose output C is stored in bf16, for the bf16 precision modes' LM head
 * (nn/precision.py): the logits, B·T·V values, are a step's largest tensor, and storing
 * them in bf16 halves what a step moves to disk out of core. Same contract as nl_gemm
 * (kernels/cpu/gemm.c) with beta = 0 (C is written, never read):
 *   C[b] = bf16(alpha · op(A[b]) · op(B[b])),  b < batch
 * products summed in float32 and rounded once, to nearest even, when stored.
 *
 *   nl_gemm_bf16_c16: A and B bf16 (mode bf16). oneDNN's matmul writes the bf16 C
 *     itself from its float32 accumulators (no float32 C anywhere), through gemm_bf16.c's
 *     matmul (nl_dnnl_gemm: one thread per call, safe from several workers at once). Without AVX-512 BF16 (oneDNN 2.6: no bf16 matmul),
 *     nl_gemm_bf16's float32 result in a scratch buffer, then rounded.
 *   nl_gemm_c16: A and B float32 (mode bf16-storage: float32 compute): sgemm into a
 *     scratch buffer, then rounded. The float32 C lives only inside the task, so it is
 *     never a StarPU tile, never counted in the RAM cap and never evicted.
 * And nl_gemm_a16, the backward's product of that bf16 tensor (A) with float32 B (below). */
#include "prototypes.h"
#include "formula.h"
#include "core.h"
#include <stdint.h>
#include <stdlib.h>
#include "onednn.h"

/* A float32 scratch (C, or a widened A); NULL (error said) without memory */
static float *scratch_c(const char *who, int64_t values)
{
    float *c = malloc((size_t)values * sizeof *c);
    if (!c)
        nl_error("%s: no memory for a float32 scratch of %lld values", who, (long long)values);
    return c;
}

/* C = bf16(alpha·op(A)·op(B)) through a float32 C of the task's own: A and B float32
 * (sgemm) or bf16 (nl_gemm_bf16, where oneDNN has no bf16 matmul writing bf16) */
static void rounded_product(const char *who, int bf16_inputs, int64_t batch, int64_t m,
                            int64_t n, int64_t k, int32_t trans_a, int32_t trans_b, float alpha,
                            const void *a, const void *b, uint16_t *c)
{
    float *c32 = scratch_c(who, batch * m * n);
    if (!c32) return;
    if (bf16_inputs)
        nl_gemm_bf16(batch, m, n, k, trans_a, trans_b, alpha, 0.0f, a, b, c32);
    else
        nl_gemm(batch, m, n, k, trans_a, trans_b, alpha, 0.0f, a, b, c32);
    nl_f32_to_bf16(batch * m * n, c32, c);
    free(c32);
}

void nl_gemm_c16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, const float *a, const float *b, uint16_t *c)
{
    rounded_product("gemm_c16", 0, batch, m, n, k, trans_a, trans_b, alpha, a, b, c);
}

/* C = alpha·op(A)·op(B) + beta·C with A bf16 and B, C float32: A widened (exactly) into a
 * scratch of the task's own, then sgemm. The bf16-storage mode's LM head backward reads the
 * bf16 logits' gradient this way, so no float32 copy of it is ever a StarPU tile. */
void nl_gemm_a16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, float beta, const uint16_t *a, const float *b,
                 float *c)
{
    float *a32 = scratch_c("gemm_a16", batch * m * k);
    if (!a32) return;
    nl_bf16_to_f32(batch * m * k, a, a32);
    nl_gemm(batch, m, n, k, trans_a, trans_b, alpha, beta, a32, b, c);
    free(a32);
}

void nl_gemm_bf16_c16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                      int32_t trans_b, float alpha, const uint16_t *a, const uint16_t *b,
                      uint16_t *c)
{
    if (nl_dnnl_gemm("gemm_bf16_c16", batch, m, n, k, trans_a, trans_b, alpha, 0.0f,
                     dnnl_bf16, a, b, c) == 1)
        rounded_product("gemm_bf16_c16", 1, batch, m, n, k, trans_a, trans_b, alpha, a, b,
                        c);
}
