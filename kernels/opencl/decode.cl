/* Generation with a KV cache on an OpenCL device: the kernels of kernels/cpu/decode.c (same
 * arguments, layouts and masking rule; see there). */

/* cache[r, j, c0 + i, e] = x[r·sb + (x0 + i)·st + j·sh + e]: one work item per value */
__kernel void nl_kv_write(long b, long h, long d, long sb, long st, long sh, long x0, long cs,
                          long c0, long n, __global const float *x, __global float *cache)
{
    long id = get_global_id(0);
    if (id >= b * h * n * d) return;
    long e = id % d, i = id / d % n, j = id / (d * n) % h, r = id / (d * n * h);
    cache[((r * h + j) * cs + c0 + i) * d + e] = x[r * sb + (x0 + i) * st + j * sh + e];
}

/* One work item per (row, query head, query): the online-softmax step over this cache tile's
 * keys that the query sees, in two passes over them (the maximum, then the weighted sum),
 * so that no per-key scratch is needed. */
__kernel void nl_attend(long b, long h, long g, long d, long tq, long tk, long q0, long k0,
                        long qb, long qt, long qh, long yb, long yt, long yh, float scale,
                        int first, int last, __global const float *q, __global const long *pads,
                        __global const float *k, __global const float *v, __global float *y,
                        __global float *stats)
{
    long id = get_global_id(0);
    if (id >= b * h * g * tq) return;
    long i = id % tq, j = id / tq % (h * g), r = id / (tq * h * g);   /* query head j */
    long pos = q0 + i, pad = pads[r];
    long lo = (pad < pos ? pad : pos) - k0, hi = pos - k0;
    long p0 = lo > 0 ? lo : 0, p1 = hi < tk - 1 ? hi : tk - 1;
    __global const float *qi = q + r * qb + i * qt + j * qh;
    __global const float *kh = k + (r * h + j / g) * tk * d, *vh = v + (r * h + j / g) * tk * d;
    __global float *yi = y + r * yb + i * yt + j * yh;
    __global float *st = stats + ((r * tq + i) * h * g + j) * 2;
    float m = first ? -INFINITY : st[0], l = first ? 0.0f : st[1];
    if (first)
        for (long e = 0; e < d; e++) yi[e] = 0.0f;
    if (p0 <= p1) {
        float mx = -INFINITY;
        for (long p = p0; p <= p1; p++) {
            float dot = 0.0f;
            for (long e = 0; e < d; e++) dot += qi[e] * kh[p * d + e];
            mx = fmax(mx, scale * dot);
        }
        float mnew = fmax(mx, m);
        float c = m == -INFINITY ? 0.0f : exp(m - mnew);
        l *= c;
        for (long e = 0; e < d; e++) yi[e] *= c;
        for (long p = p0; p <= p1; p++) {
            float dot = 0.0f;
            for (long e = 0; e < d; e++) dot += qi[e] * kh[p * d + e];
            float w = exp(scale * dot - mnew);
            l += w;
            for (long e = 0; e < d; e++) yi[e] += w * vh[p * d + e];
        }
        m = mnew;
    }
    if (last) {
        float inv = 1.0f / l;
        for (long e = 0; e < d; e++) yi[e] *= inv;
    }
    st[0] = m;
    st[1] = l;
}
