/* Layer normalisation along one axis of an (m, k, n) tile: the formulas and the
 * split-axis passes of kernels/cpu/norm.c (read its header comment). Every pass but
 * layer_norm_tile is a formula of the codelet table: generated (formulas.cu), one thread
 * per fiber x[i, :, l] summing in double along j in order, or one per value. */
#include "common.cuh"

/* ---- layer normalisation ---------------------------------------------------------
 * mean = Σ_j x / K, var = Σ_j (x − mean)² / K, r = 1/√(var + eps),
 * y = (x − mean)·r·gamma[j] + bias[j]; backward with xhat = (x − mean)·r, g = dy·gamma[j]:
 * dx = r·(g − mean_j g − xhat·mean_j(g·xhat)) + beta·dx,
 * dgamma[j] = Σ_{i,l} dy·xhat, dbias[j] = Σ_{i,l} dy */

/* the whole forward of a tile holding the full axis: mean, inv_std, then y (three kernels
 * queued in order on the stream) */
const char *nl_cu_layer_norm_tile(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                                  float eps, const float *x, const float *gamma,
                                  const float *bias, float *y, float *mean, float *inv_std)
{
    const char *err = nl_cu_sum_slice(stream, m, k, n, 1.0f / (float)k, 0.0f, x, mean);
    if (!err)
        err = nl_cu_layer_norm_invstd(stream, m, k, n, 1.0f / (float)k, 0.0f, eps, 1, x, mean,
                                      inv_std);
    if (!err)
        err = nl_cu_layer_norm_apply(stream, m, k, n, x, mean, inv_std, gamma, bias, y);
    return err;
}
