/* Batched matrix product on row-major tiles, through scipy-openblas32 with one
 * thread (the runtime sets it): workers call it concurrently.
 *   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b],  b < batch
 * op(A) is m×k, stored m×k or, with trans_a, k×m; likewise op(B) is k×n. */
#include "prototypes.h"
#include <stdint.h>
#include <cblas.h>

void nl_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
             float alpha, float beta, const float *a, const float *b, float *c)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
    blasint lda = (blasint)(trans_a ? m : k), ldb = (blasint)(trans_b ? k : n);
    for (int64_t i = 0; i < batch; i++)
        scipy_cblas_sgemm(CblasRowMajor, ta, tb, (blasint)m, (blasint)n, (blasint)k, alpha,
                          a + i * m * k, lda, b + i * k * n, ldb, beta, c + i * m * n,
                          (blasint)n);
}
