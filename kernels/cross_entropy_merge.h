/* One token's cross-entropy statistics merged with another vocabulary tile's, shared by the
 * C kernel (cpu/loss.c) and the CUDA one (cuda/loss.cu) so that both merge alike.
 * stats = (m = max logit, s = Σ exp(x − m) as a float pair s_hi + s_lo, picked logit):
 *   m = max(m_a, m_b),  s = s_a·e^(m_a − m) + s_b·e^(m_b − m)  (in double),  picked_a += picked_b */
#pragma once
#include <math.h>

#ifdef __CUDACC__
#define NL_HOST_DEVICE __host__ __device__
#else
#define NL_HOST_DEVICE
#endif

static inline NL_HOST_DEVICE void nl_cross_entropy_merge_one(float *a, const float *b)
{
    float m = fmaxf(a[0], b[0]);
    double s = 0.0;
    if (m > -INFINITY)
        s = ((double)a[1] + a[2]) * exp((double)a[0] - m)
            + ((double)b[1] + b[2]) * exp((double)b[0] - m);
    a[0] = m;
    a[1] = (float)s;
    a[2] = (float)(s - (double)a[1]);
    a[3] += b[3];
}
