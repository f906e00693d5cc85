/* Optimizer steps on n parameters, in place, as kernels/cpu/optim.c (torch.optim's
 * formulas; the step-dependent scalars come folded in double from Python). */
#include "common.cuh"

/* Adam / AdamW:  g' = grad_scale·g + l2·p;  m = β1·m + (1 − β1)·g';  v = β2·v + (1 − β2)·g'²;
 *   p = decay·p − step_size · m / (√v · inv_bc2_sqrt + eps) */
__global__ static void adamw(int64_t n, float beta1, float beta2, float one_m_beta1,
                             float one_m_beta2, float step_size, float inv_bc2_sqrt, float eps,
                             float decay, float l2, float grad_scale, float *p, const float *g,
                             float *m, float *v)
{
    NL_CU_FOR(i, n) {
        float gi = grad_scale * g[i] + l2 * p[i];
        float mi = beta1 * m[i] + one_m_beta1 * gi;
        float vi = beta2 * v[i] + one_m_beta2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = decay * p[i] - step_size * mi / (sqrtf(vi) * inv_bc2_sqrt + eps);
    }
}

const char *nl_cu_adamw(cudaStream_t stream, int64_t n, float beta1, float beta2,
                        float one_m_beta1, float one_m_beta2, float step_size,
                        float inv_bc2_sqrt, float eps, float decay, float l2, float grad_scale,
                        float *p, const float *g, float *m, float *v)
{
    NL_CU_LAUNCH(adamw, n, stream, n, beta1, beta2, one_m_beta1, one_m_beta2, step_size,
                 inv_bc2_sqrt, eps, decay, l2, grad_scale, p, g, m, v);
}

/* SGD:  p −= lr · (grad_scale·g + wd·p) */
__global__ static void sgd(int64_t n, float lr, float wd, float grad_scale, float *p,
                           const float *g)
{
    NL_CU_FOR(i, n) p[i] -= lr * (grad_scale * g[i] + wd * p[i]);
}

const char *nl_cu_sgd(cudaStream_t stream, int64_t n, float lr, float wd, float grad_scale,
                      float *p, const float *g)
{
    NL_CU_LAUNCH(sgd, n, stream, n, lr, wd, grad_scale, p, g);
}

/* SGD with momentum:  d = grad_scale·g + wd·p;  buf = first ? d : momentum·buf +
 *   (1 − dampening)·d;  p −= lr · (nesterov ? d + momentum·buf : buf) */
__global__ static void sgd_momentum(int64_t n, float lr, float wd, float momentum,
                                    float one_m_dampening, int32_t nesterov, int32_t first,
                                    float grad_scale, float *p, const float *g, float *buf)
{
    NL_CU_FOR(i, n) {
        float d = grad_scale * g[i] + wd * p[i];
        float b = first ? d : momentum * buf[i] + one_m_dampening * d;
        buf[i] = b;
        p[i] -= lr * (nesterov ? d + momentum * b : b);
    }
}

const char *nl_cu_sgd_momentum(cudaStream_t stream, int64_t n, float lr, float wd,
                               float momentum, float one_m_dampening, int32_t nesterov,
                               int32_t first, float grad_scale, float *p, const float *g,
                               float *buf)
{
    NL_CU_LAUNCH(sgd_momentum, n, stream, n, lr, wd, momentum, one_m_dampening, nesterov,
                 first, grad_scale, p, g, buf);
}
