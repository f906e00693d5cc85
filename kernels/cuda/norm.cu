/* Layer normalisation along one axis of an (m, k, n) tile: the formulas and the
 * split-axis passes of kernels/cpu/norm.c (read its header comment), one thread per fiber
 * x[i, :, l] (slice entry e = i*n + l), sums in double along j in order. layer_norm_apply
 * and layer_norm_backward_dx are formulas of the codelet table: generated (formulas.cu). */
#include "common.cuh"

/* the fiber of slice entry e: its first element, then stride n */
#define FIBER(e) ((e) / n * k * n + (e) % n)

/* ---- layer normalisation ---------------------------------------------------------
 * mean = Σ_j x / K, var = Σ_j (x − mean)² / K, r = 1/√(var + eps),
 * y = (x − mean)·r·gamma[j] + bias[j]; backward with xhat = (x − mean)·r, g = dy·gamma[j]:
 * dx = r·(g − mean_j g − xhat·mean_j(g·xhat)) + beta·dx,
 * dgamma[j] = Σ_{i,l} dy·xhat, dbias[j] = Σ_{i,l} dy */

/* acc = alpha·Σ_j (x − mean)² + beta·s;  s = finish ? 1/√(acc + eps) : acc */
__global__ static void layer_norm_invstd(int64_t m, int64_t k, int64_t n, float alpha,
                                         float beta, float eps, int32_t finish,
                                         const float *x, const float *mean, float *s)
{
    NL_CU_FOR(e, m * n) {
        const float *p = x + FIBER(e);
        const float mu = mean[e];
        double acc = 0;
        for (int64_t j = 0; j < k; j++) {
            double d = (double)p[j * n] - mu;
            acc += d * d;
        }
        double v = alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * s[e]);
        s[e] = (float)(finish ? 1.0 / sqrt(v + eps) : v);
    }
}

const char *nl_cu_layer_norm_invstd(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                                    float alpha, float beta, float eps, int32_t finish,
                                    const float *x, const float *mean, float *s)
{
    NL_CU_LAUNCH(layer_norm_invstd, m * n, stream, m, k, n, alpha, beta, eps, finish, x, mean,
                 s);
}

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

/* a1 = Σ_j g, a2 = Σ_j g·xhat along the fiber of slice entry e */
__device__ static inline void ln_sums(int64_t m, int64_t k, int64_t n, int64_t e,
                                      const float *x, const float *dy, const float *gamma,
                                      const float *mean, const float *inv_std, double *a1,
                                      double *a2)
{
    const int64_t f = FIBER(e);
    const float mu = mean[e], r = inv_std[e];
    *a1 = *a2 = 0;
    for (int64_t j = 0; j < k; j++) {
        double gv = (double)dy[f + j * n] * gamma[j];
        *a1 += gv;
        *a2 += gv * (((double)x[f + j * n] - mu) * r);
    }
}

/* dx = r·(g − s1 − xhat·s2) + beta·dx along the fiber of slice entry e */
__device__ static inline void ln_dx(int64_t m, int64_t k, int64_t n, int64_t e, float beta,
                                    const float *x, const float *dy, const float *gamma,
                                    const float *mean, const float *inv_std, double s1,
                                    double s2, float *dx)
{
    const int64_t f = FIBER(e);
    const float mu = mean[e], r = inv_std[e];
    for (int64_t j = 0; j < k; j++) {
        const int64_t o = f + j * n;
        double xhat = ((double)x[o] - mu) * r, g = (double)dy[o] * gamma[j];
        float v = (float)(r * (g - s1 - xhat * s2));
        dx[o] = beta == 0.0f ? v : v + beta * dx[o];
    }
}

/* sums = (alpha·Σ_j g, alpha·Σ_j g·xhat) + beta·sums, two blocks of m·n */
__global__ static void layer_norm_backward_sums(int64_t m, int64_t k, int64_t n, float alpha,
                                                float beta, const float *x, const float *dy,
                                                const float *gamma, const float *mean,
                                                const float *inv_std, float *sums)
{
    NL_CU_FOR(e, m * n) {
        double a1, a2;
        ln_sums(m, k, n, e, x, dy, gamma, mean, inv_std, &a1, &a2);
        float *s1 = sums + e, *s2 = sums + m * n + e;
        *s1 = (float)(alpha * a1 + (beta == 0.0f ? 0.0 : (double)beta * *s1));
        *s2 = (float)(alpha * a2 + (beta == 0.0f ? 0.0 : (double)beta * *s2));
    }
}

const char *nl_cu_layer_norm_backward_sums(cudaStream_t stream, int64_t m, int64_t k,
                                           int64_t n, float alpha, float beta, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *mean, const float *inv_std,
                                           float *sums)
{
    NL_CU_LAUNCH(layer_norm_backward_sums, m * n, stream, m, k, n, alpha, beta, x, dy, gamma,
                 mean, inv_std, sums);
}

__global__ static void layer_norm_backward_tile(int64_t m, int64_t k, int64_t n, float beta,
                                                const float *x, const float *dy,
                                                const float *gamma, const float *mean,
                                                const float *inv_std, float *dx)
{
    NL_CU_FOR(e, m * n) {
        double a1, a2;
        ln_sums(m, k, n, e, x, dy, gamma, mean, inv_std, &a1, &a2);
        ln_dx(m, k, n, e, beta, x, dy, gamma, mean, inv_std, a1 / k, a2 / k, dx);
    }
}

const char *nl_cu_layer_norm_backward_tile(cudaStream_t stream, int64_t m, int64_t k,
                                           int64_t n, float beta, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *mean, const float *inv_std, float *dx)
{
    NL_CU_LAUNCH(layer_norm_backward_tile, m * n, stream, m, k, n, beta, x, dy, gamma, mean,
                 inv_std, dx);
}

/* dgamma[j] = Σ_{i,l} dy·xhat + beta_gamma·dgamma[j], dbias[j] = Σ_{i,l} dy +
 * beta_bias·dbias[j]: one thread per j */
__global__ static void layer_norm_backward_fiber(int64_t m, int64_t k, int64_t n,
                                                 float beta_gamma, float beta_bias,
                                                 const float *x, const float *dy,
                                                 const float *mean, const float *inv_std,
                                                 float *dgamma, float *dbias)
{
    NL_CU_FOR(j, k) {
        double ag = 0, ab = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t l = 0; l < n; l++) {
                const int64_t o = (i * k + j) * n + l, e = i * n + l;
                ab += dy[o];
                ag += dy[o] * (((double)x[o] - mean[e]) * inv_std[e]);
            }
        dgamma[j] = (float)(ag + (beta_gamma == 0.0f ? 0.0 : (double)beta_gamma * dgamma[j]));
        dbias[j] = (float)(ab + (beta_bias == 0.0f ? 0.0 : (double)beta_bias * dbias[j]));
    }
}

const char *nl_cu_layer_norm_backward_fiber(cudaStream_t stream, int64_t m, int64_t k,
                                            int64_t n, float beta_gamma, float beta_bias,
                                            const float *x, const float *dy,
                                            const float *mean, const float *inv_std,
                                            float *dgamma, float *dbias)
{
    NL_CU_LAUNCH(layer_norm_backward_fiber, k, stream, m, k, n, beta_gamma, beta_bias, x, dy,
                 mean, inv_std, dgamma, dbias);
}
