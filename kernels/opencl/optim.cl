/* Optimizer steps on n parameters, in place: the formulas of kernels/cpu/optim.c (the
 * Python side folds the step-dependent scalars in double precision). */

__kernel void nl_adamw(long n, float beta1, float beta2, float one_m_beta1,
                       float one_m_beta2, float step_size, float inv_bc2_sqrt, float eps,
                       float decay, float l2, float grad_scale, __global float *p,
                       __global const float *g, __global float *m, __global float *v)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float gi = grad_scale * g[i] + l2 * p[i];
    float mi = beta1 * m[i] + one_m_beta1 * gi;
    float vi = beta2 * v[i] + one_m_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = decay * p[i] - step_size * mi / (sqrt(vi) * inv_bc2_sqrt + eps);
}

__kernel void nl_sgd(long n, float lr, float wd, float grad_scale, __global float *p,
                     __global const float *g)
{
    long i = get_global_id(0);
    if (i < n) p[i] -= lr * (grad_scale * g[i] + wd * p[i]);
}

__kernel void nl_sgd_momentum(long n, float lr, float wd, float momentum,
                              float one_m_dampening, int nesterov, int first,
                              float grad_scale, __global float *p, __global const float *g,
                              __global float *buf)
{
    long i = get_global_id(0);
    if (i >= n) return;
    float d = grad_scale * g[i] + wd * p[i];
    float b = first ? d : momentum * buf[i] + one_m_dampening * d;
    buf[i] = b;
    p[i] -= lr * (nesterov ? d + momentum * b : b);
}
