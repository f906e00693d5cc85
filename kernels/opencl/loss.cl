/* Cross-entropy over a vocabulary split into tiles, on the OpenCL worker: the stats,
 * merge, loss and gradient of kernels/cpu/loss.c (the same max shift, the same stats
 * layout (m, s_hi, s_lo, picked) per token and tile). The CPU sums Σ exp in double;
 * here everything is float32 (many GPUs have no or slow fp64), and the sums that need
 * more than a float's 24 bits (s ≈ 1 when the loss is near 0: log s would keep a few
 * digits) are carried as float-float pairs hi + lo with error-free transformations
 * (Knuth's two-sum, an fma for the product's error). */

/* a + b as (sum, its rounding error), exactly; an infinite or NaN sum has no error */
static float2 nl_two_sum(float a, float b)
{
    float s = a + b, bb = s - a;
    return (float2)(s, isfinite(s) ? (a - (s - bb)) + (b - bb) : 0.0f);
}

/* hi + lo renormalised, for |hi| ≥ |lo| */
static float2 nl_fast_two_sum(float hi, float lo)
{
    float s = hi + lo;
    return (float2)(s, isfinite(s) ? lo - (s - hi) : 0.0f);
}

static float2 nl_ff_add_f(float2 a, float b)
{
    float2 t = nl_two_sum(a.x, b);
    return nl_fast_two_sum(t.x, t.y + a.y);
}

static float2 nl_ff_add(float2 a, float2 b)
{
    float2 t = nl_two_sum(a.x, b.x);
    return nl_fast_two_sum(t.x, t.y + (a.y + b.y));
}

static float2 nl_ff_mul_f(float2 a, float b)
{
    float p = a.x * b;
    return nl_fast_two_sum(p, isfinite(p) ? fma(a.x, b, -p) + a.y * b : 0.0f);
}

/* exp(a − b) with a − b's rounding error folded in (the CPU takes a − b in double) */
static float nl_exp_diff(float a, float b)
{
    float2 d = nl_two_sum(a, -b);
    float e = exp(d.x);
    return e + e * d.y;
}

/* Per token i (one work item each): the tile's max m, Σ_j exp(x[i, j] − m) as a
 * float-float, and the label's logit if the label falls in [voff, voff + vt) (else 0) */
__kernel void nl_cross_entropy_stats(long n, long vt, long voff, __global const float *x,
                                     __global const long *labels, __global float *stats)
{
    long i = get_global_id(0);
    if (i >= n) return;
    __global const float *row = x + i * vt;
    float m = -INFINITY;
    for (long j = 0; j < vt; j++) m = fmax(m, row[j]);
    float2 s = (float2)(0.0f, 0.0f);
    if (m > -INFINITY)   /* all −∞: s = 0, no NaN */
        for (long j = 0; j < vt; j++) s = nl_ff_add_f(s, exp(row[j] - m));
    long c = labels[i] - voff;
    __global float *st = stats + 4 * i;
    st[0] = m;
    st[1] = s.x;
    st[2] = s.y;
    st[3] = c >= 0 && c < vt ? row[c] : 0.0f;
}

/* stats ← merge(stats, part), one work item per token:
 * m = max(m1, m2), s = s1·exp(m1 − m) + s2·exp(m2 − m), picked = p1 + p2 */
__kernel void nl_cross_entropy_merge(long n, __global float *stats, __global const float *part)
{
    long i = get_global_id(0);
    if (i >= n) return;
    __global float *a = stats + 4 * i;
    __global const float *b = part + 4 * i;
    float m = fmax(a[0], b[0]);
    float2 s = (float2)(0.0f, 0.0f);
    if (m > -INFINITY)
        s = nl_ff_add(nl_ff_mul_f((float2)(a[1], a[2]), nl_exp_diff(a[0], m)),
                      nl_ff_mul_f((float2)(b[1], b[2]), nl_exp_diff(b[0], m)));
    a[0] = m;
    a[1] = s.x;
    a[2] = s.y;
    a[3] += b[3];
}

/* loss[0] = (first ? 0 : loss[0]) + scale · Σ_i (m_i + log s_i − picked_i): one work item
 * (a tile's n tokens), the sum as a float-float; log(hi + lo) = log hi + lo/hi (the
 * next term, (lo/hi)²/2, is below 2^−49) */
__kernel void nl_cross_entropy_loss(long n, float scale, int first,
                                    __global const float *stats, __global float *loss)
{
    if (get_global_id(0) != 0) return;
    float2 sum = (float2)(0.0f, 0.0f);
    for (long i = 0; i < n; i++) {
        __global const float *st = stats + 4 * i;
        sum = nl_ff_add_f(sum, st[0]);
        sum = nl_ff_add_f(sum, log(st[1]));
        sum = nl_ff_add_f(sum, st[1] > 0.0f ? st[2] / st[1] : 0.0f);
        sum = nl_ff_add_f(sum, -st[3]);
    }
    float2 total = nl_ff_mul_f(sum, scale);
    if (!first) total = nl_ff_add_f(total, loss[0]);
    loss[0] = total.x + total.y;
}

/* dx[i, j] = scale · (exp(x[i, j] − m)/s − [voff + j == label_i]), one work item per
 * value. Each item reads only its own x[i, j] before writing dx[i, j]: dx may be x
 * itself (the gradient written over the logits). The label's entry is formed as
 * −scale·(s − e)/s with s − e exact before rounding, as the CPU does in double: k·e −
 * scale would cancel when p is near 1. */
__kernel void nl_cross_entropy_backward(long n, long vt, long voff, float scale,
                                        __global const float *x, __global const long *labels,
                                        __global const float *stats, __global float *dx)
{
    long id = get_global_id(0);
    if (id >= n * vt) return;
    long i = id / vt, j = id % vt;
    __global const float *st = stats + 4 * i;
    float m = st[0], hi = st[1], lo = st[2], e = exp(x[id] - m);
    if (j == labels[i] - voff) {
        float2 d = nl_two_sum(hi, -e);
        float q = (d.x + (d.y + lo)) / hi;   /* (s − e)/hi, then /(1 + lo/hi) below */
        dx[id] = -scale * (lo != 0.0f ? q - q * (lo / hi) : q);
    } else {
        float k = scale / hi;                /* scale/(hi + lo) to first order in lo/hi */
        dx[id] = (lo != 0.0f ? k - k * (lo / hi) : k) * e;
    }
}
