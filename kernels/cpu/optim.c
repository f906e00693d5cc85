/* Optimizer steps on n parameters, in place, exactly as torch.optim computes
 * them. The Python side folds the step-dependent scalars in double precision
 * (1 − β, lr/(1 − β1^t), 1/√(1 − β2^t)): in float32 1 − 0.999 is off by 1e-5. */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

/* Adam / AdamW:  g' = g + l2·p;  p = decay·p;  m = β1·m + (1 − β1)·g';
 *   v = β2·v + (1 − β2)·g'²;  p −= step_size · m / (√v · inv_bc2_sqrt + eps)
 * AdamW: decay = 1 − lr·wd, l2 = 0.  Adam with L2 decay: decay = 1, l2 = wd. */
void nl_adamw(int64_t n, float beta1, float beta2, float one_m_beta1, float one_m_beta2,
              float step_size, float inv_bc2_sqrt, float eps, float decay, float l2,
              float grad_scale, float *p, const float *g, float *m, float *v)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = grad_scale * g[i] + l2 * p[i];
        float mi = beta1 * m[i] + one_m_beta1 * gi;
        float vi = beta2 * v[i] + one_m_beta2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = decay * p[i] - step_size * mi / (sqrtf(vi) * inv_bc2_sqrt + eps);
    }
}

/* SGD without momentum:  p −= lr · (g + wd·p) */
void nl_sgd(int64_t n, float lr, float wd, float grad_scale, float *p, const float *g)
{
    for (int64_t i = 0; i < n; i++) p[i] -= lr * (grad_scale * g[i] + wd * p[i]);
}

/* SGD with momentum:  d = g + wd·p;  buf = first ? d : momentum·buf + (1 − dampening)·d;
 *   p −= lr · (nesterov ? d + momentum·buf : buf) */
void nl_sgd_momentum(int64_t n, float lr, float wd, float momentum, float one_m_dampening,
                     int32_t nesterov, int32_t first, float grad_scale, float *p,
                     const float *g, float *buf)
{
    for (int64_t i = 0; i < n; i++) {
        float d = grad_scale * g[i] + wd * p[i];
        float b = first ? d : momentum * buf[i] + one_m_dampening * d;
        buf[i] = b;
        p[i] -= lr * (nesterov ? d + momentum * b : b);
    }
}
