/* Shared by axis.c and norm.c: how a tile is walked along one axis.
 *
 * A tile is viewed as (m, k, n) in C order: k is its extent along the axis, m the
 * product of the dimensions before it, n after it; element (i, j, l) sits at
 * (i*k + j)*n + l. A slice value s[i*n + l] belongs to the fiber x[i, :, l]; a
 * fiber value f[j] to the axis position j.
 *
 * Kernels walk a tile in groups whose inner loop always runs over contiguous
 * values ("lanes" q < nb), so that it vectorises; the outer loop runs over rows
 * c < nc, row c holding lanes x[x + c*sc + q] (the last row only `tail` of them):
 *   n > 1, "columns": one i and up to NL_NB neighbours l; row c is the axis
 *          position j = c, and lane q belongs to slice entry s + q.
 *   n == 1, "lanes": one whole fiber x[i, :] (contiguous), cut into rows of
 *          NL_NB: lane q of row c is j = c*NL_NB + q; every lane belongs to slice
 *          entry s, so a kernel folds its lanes' partial results into one.
 * Kernel bodies take the mode as a constant (`lanes`), and NL_FOR_GROUPS
 * instantiates each for both modes, so the compiler sees unit strides and plain
 * indices in either. Sums accumulate in double, in a fixed order: reproducible. */
#pragma once
#include <math.h>
#include <stdint.h>

enum { NL_NB = 64 };

struct nl_group { int64_t s, x, nb, nc, tail, sc; };

static inline int64_t nl_ngroups(int64_t m, int64_t n)
{
    return n == 1 ? m : m * ((n + NL_NB - 1) / NL_NB);
}

static inline struct nl_group nl_group_at(int64_t m, int64_t k, int64_t n, int64_t g)
{
    (void)m;
    if (n == 1) {
        int64_t nc = (k + NL_NB - 1) / NL_NB;
        return (struct nl_group){g, g * k, k < NL_NB ? k : NL_NB, nc, k - (nc - 1) * NL_NB,
                                 NL_NB};
    }
    int64_t per = (n + NL_NB - 1) / NL_NB, i = g / per, l0 = g % per * NL_NB;
    int64_t nb = n - l0 < NL_NB ? n - l0 : NL_NB;
    return (struct nl_group){i * n + l0, i * k * n + l0, nb, k, nb, n};
}

/* Run body(G, lanes, args...) over every group of an (m, k, n) tile */
#define NL_FOR_GROUPS(m, k, n, body, ...)                                    \
    for (int64_t g_ = 0; g_ < nl_ngroups(m, n); g_++) {                      \
        struct nl_group G_ = nl_group_at(m, k, n, g_);                       \
        if ((n) == 1)                                                        \
            body(G_, 1, __VA_ARGS__);                                        \
        else                                                                 \
            body(G_, 0, __VA_ARGS__);                                        \
    }

#define NL_INLINE static inline __attribute__((always_inline))

/* lanes in row c */
NL_INLINE int64_t nl_nq(struct nl_group G, int64_t c) { return c == G.nc - 1 ? G.tail : G.nb; }

/* the axis position j of lane q in row c */
NL_INLINE int64_t nl_j(int lanes, int64_t c, int64_t q) { return lanes ? c * NL_NB + q : c; }

/* v[q] = s[slice entry of lane q] */
NL_INLINE void nl_load_slice(struct nl_group G, int lanes, const float *s, float *v)
{
    for (int64_t q = 0; q < G.nb; q++) v[q] = s[G.s + (lanes ? 0 : q)];
}

/* In "lanes" mode, every lane gets the sum (max) of all NL_NB lanes: the fiber's.
 * Lanes a short fiber never reached keep their start value, 0 (-inf), which is
 * neutral: callers start all NL_NB lanes. The fold is a tree (lane q takes lane
 * q + w, w = 32, 16, …, 1): log2(NL_NB) dependent vector steps instead of a serial
 * chain of NL_NB adds, which cost more than the fiber itself for short fibers
 * (attention rows of 128, layer norm rows of 256). A fixed order: reproducible. */
NL_INLINE void nl_fold_sum(struct nl_group G, int lanes, double *acc)
{
    if (!lanes) return;
    for (int w = NL_NB / 2; w > 0; w /= 2)
        for (int q = 0; q < w; q++) acc[q] += acc[q + w];
    for (int64_t q = 1; q < G.nb; q++) acc[q] = acc[0];
}

/* the larger of a and b, a NaN in either winning */
NL_INLINE float nl_max_nan(float a, float b) { return ((b > a) | (b != b)) ? b : a; }

NL_INLINE void nl_fold_max(struct nl_group G, int lanes, float *mx)
{
    if (!lanes) return;
    for (int w = NL_NB / 2; w > 0; w /= 2)
        for (int q = 0; q < w; q++) mx[q] = nl_max_nan(mx[q], mx[q + w]);
    for (int64_t q = 1; q < G.nb; q++) mx[q] = mx[0];
}

/* mx[q] = max over the group's values of x (a NaN wins: never silently dropped) */
NL_INLINE void nl_group_max(struct nl_group G, int lanes, const float *x, float *mx)
{
    for (int64_t q = 0; q < NL_NB; q++) mx[q] = -INFINITY;
    for (int64_t c = 0; c < G.nc; c++) {
        const float *p = x + G.x + c * G.sc;
        for (int64_t q = 0; q < nl_nq(G, c); q++)
            mx[q] = nl_max_nan(mx[q], p[q]);
    }
    nl_fold_max(G, lanes, mx);
}

/* out[q] = alpha*acc[q] + beta*out[q] (q < nb); beta == 0 overwrites without reading
 * (BLAS rule) */
NL_INLINE void nl_store(int64_t nb, float alpha, float beta, const double *acc, float *out)
{
    for (int64_t q = 0; q < nb; q++)
        out[q] = (float)(alpha * acc[q] + (beta == 0.0f ? 0.0 : (double)beta * out[q]));
}

/* The group's slice entries = alpha·(its sums) + beta·themselves (lanes folded) */
NL_INLINE void nl_store_slice(struct nl_group G, int lanes, float alpha, float beta,
                              double *acc, float *s)
{
    nl_fold_sum(G, lanes, acc);
    nl_store(lanes ? 1 : G.nb, alpha, beta, acc, s + G.s);
}

/* axis.c kernels that norm.c builds on */
void nl_sum_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *s);
