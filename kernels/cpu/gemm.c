/* Batched matrix product on row-major tiles, through scipy-openblas32 with one
 * thread (the runtime sets it): workers call it concurrently.
 *   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b],  b < batch
 * op(A) is m×k, stored m×k or, with trans_a, k×m; likewise op(B) is k×n.
 *
 * Why no transposed-transposed call: scipy-openblas32 0.3.34 (DYNAMIC_ARCH, Haswell
 * and SkylakeX code alike) gives wrong products and corrupts the heap when two threads
 * run sgemm(Trans, Trans) at once, at any size up to ~130 (scripts/openblas_tt_race.c
 * reproduces it without StarPU; NN, NT and TN are clean). So for op(A)·op(B) with both
 * transposed, the smaller operand is transposed into scratch first and the product
 * goes through NT or TN: O(mk) or O(nk) extra work beside the 2mnk flops. The result
 * is the same sum of the same products, rounded as OpenBLAS rounds it. */
#include "prototypes.h"
#include "core.h"
#include <stdint.h>
#include <stdlib.h>
#include <cblas.h>

/* out (cols×rows) = in (rows×cols)ᵀ, row-major, in 32×32 blocks for the cache */
static void transpose(int64_t rows, int64_t cols, const float *in, float *out)
{
    for (int64_t i0 = 0; i0 < rows; i0 += 32)
        for (int64_t j0 = 0; j0 < cols; j0 += 32)
            for (int64_t i = i0; i < rows && i < i0 + 32; i++)
                for (int64_t j = j0; j < cols && j < j0 + 32; j++)
                    out[j * rows + i] = in[i * cols + j];
}

/* The rows of C one matrix-vector product each, when op(A) has at most GEMV_ROWS rows (a
 * generation step: one token per sequence): sgemm packs all of B first, which for one row
 * costs 2.5x the sgemv that streams it once (8192x256 B, one core: 724 vs 289 us; at 4
 * rows sgemm wins: 766 vs 1158 us — docs/generation.md). A row of op(A) is contiguous
 * unless A is stored k×m with m > 1 (its stride is then m). */
enum { GEMV_ROWS = 2 };

static void gemv_rows(int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
                      float alpha, float beta, const float *a, const float *b, float *c)
{
    for (int64_t r = 0; r < m; r++) {
        const float *x = trans_a ? a + r : a + r * k;
        blasint incx = trans_a ? (blasint)m : 1;
        if (trans_b)   /* B stored n×k: c_r = B·x */
            scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)k, alpha, b,
                              (blasint)k, x, incx, beta, c + r * n, 1);
        else           /* B stored k×n: c_r = Bᵀ·x */
            scipy_cblas_sgemv(CblasRowMajor, CblasTrans, (blasint)k, (blasint)n, alpha, b,
                              (blasint)n, x, incx, beta, c + r * n, 1);
    }
}

void nl_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
            float alpha, float beta, const float *a, const float *b, float *c)
{
    if (m <= GEMV_ROWS) {
        for (int64_t i = 0; i < batch; i++)
            gemv_rows(m, n, k, trans_a, trans_b, alpha, beta, a + i * m * k, b + i * k * n,
                      c + i * m * n);
        return;
    }
    float *scratch = NULL;
    int untranspose_a = trans_a && trans_b && m * k <= n * k;
    int untranspose_b = trans_a && trans_b && !untranspose_a;
    if (untranspose_a || untranspose_b) {
        scratch = malloc((size_t)(untranspose_a ? m : n) * (size_t)k * sizeof *scratch);
        if (!scratch) {   /* said when the runtime next waits; C is left as it was */
            nl_error("gemm: no memory for a %lld×%lld transposed copy", (long long)k,
                     (long long)(untranspose_a ? m : n));
            return;
        }
    }
    int ta = trans_a && !untranspose_a, tb = trans_b && !untranspose_b;
    for (int64_t i = 0; i < batch; i++) {
        const float *ai = a + i * m * k, *bi = b + i * k * n;
        if (untranspose_a) {   /* A stored k×m: scratch m×k */
            transpose(k, m, ai, scratch);
            ai = scratch;
        } else if (untranspose_b) {   /* B stored n×k: scratch k×n */
            transpose(n, k, bi, scratch);
            bi = scratch;
        }
        scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                          tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k,
                          alpha, ai, (blasint)(ta ? m : k), bi, (blasint)(tb ? k : n), beta,
                          c + i * m * n, (blasint)n);
    }
    free(scratch);
}
