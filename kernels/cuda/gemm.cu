/* GEMM on the CUDA worker through cuBLAS (never a hand-written kernel), the contract of
 * kernels/cpu/gemm.c on row-major tiles in device memory:
 *   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b],  b < batch
 * cuBLAS is column-major: a row-major m×n C is a column-major n×m Cᵀ = op(B)ᵀ·op(A)ᵀ, so
 * the call swaps A and B (and m and n) and keeps each one's transposition. One
 * strided-batched call per task, on the handle StarPU binds to the worker's stream. With
 * beta == 0, cuBLAS does not read C (it may be uninitialised: W mode). */
#include "common.cuh"

#include <limits.h>

/* cuBLAS takes int sizes: larger tiles are refused, never truncated */
static int fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

#define NL_GEMM_CHECK_SIZES()                                                          \
    if (batch == 0 || m == 0 || n == 0) return NULL;                                   \
    if (!fits(batch) || !fits(m) || !fits(n) || !fits(k) || !fits(m * k) || !fits(k * n) \
        || !fits(m * n))                                                               \
        return "a tile dimension or matrix exceeds cuBLAS's int sizes (2^31 − 1)";

const char *nl_cu_gemm(cublasHandle_t handle, int64_t batch, int64_t m, int64_t n, int64_t k,
                       int32_t trans_a, int32_t trans_b, float alpha, float beta,
                       const float *a, const float *b, float *c)
{
    NL_GEMM_CHECK_SIZES();
    cublasStatus_t s = cublasSgemmStridedBatched(
        handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)n, (int)m, (int)k, &alpha, b, (int)(trans_b ? k : n), (long long)(k * n), a,
        (int)(trans_a ? m : k), (long long)(m * k), &beta, c, (int)n, (long long)(m * n),
        (int)batch);
    return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s);
}

/* gemm_bf16: bf16 A and B, fp32 accumulation and C (kernels/cpu/gemm_bf16.c) */
const char *nl_cu_gemm_bf16(cublasHandle_t handle, int64_t batch, int64_t m, int64_t n,
                            int64_t k, int32_t trans_a, int32_t trans_b, float alpha,
                            float beta, const uint16_t *a, const uint16_t *b, float *c)
{
    NL_GEMM_CHECK_SIZES();
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)n, (int)m, (int)k, &alpha, b, CUDA_R_16BF, (int)(trans_b ? k : n),
        (long long)(k * n), a, CUDA_R_16BF, (int)(trans_a ? m : k), (long long)(m * k), &beta,
        c, CUDA_R_32F, (int)n, (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s);
}

/* gemm_bf16_c16: bf16 A and B, C = bf16(alpha·op(A)·op(B)) (beta 0: C written unread), the
 * products summed in float32 (CUBLAS_COMPUTE_32F) and rounded once to bf16 when stored, as
 * kernels/cpu/gemm_c16.c — the bf16 modes' logits */
const char *nl_cu_gemm_bf16_c16(cublasHandle_t handle, int64_t batch, int64_t m, int64_t n,
                                int64_t k, int32_t trans_a, int32_t trans_b, float alpha,
                                const uint16_t *a, const uint16_t *b, uint16_t *c)
{
    NL_GEMM_CHECK_SIZES();
    const float beta = 0.0f;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        (int)n, (int)m, (int)k, &alpha, b, CUDA_R_16BF, (int)(trans_b ? k : n),
        (long long)(k * n), a, CUDA_R_16BF, (int)(trans_a ? m : k), (long long)(m * k), &beta,
        c, CUDA_R_16BF, (int)n, (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s);
}
