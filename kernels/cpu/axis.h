/* Shared by axis.c and norm.c: how a tile is walked along one axis.
 *
 * A tile is viewed as (m, k, n) in C order: k is its extent along the axis, m the
 * product of the dimensions before it, n after it; element (i, j, l) sits at
 * (i*k + j)*n + l. A "slice" value s[i*n + l] belongs to the fiber x[i, :, l];
 * a "fiber" value f[j] to the axis position j.
 *
 * Slice positions are visited in groups that share the inner loop:
 *   n > 1:  up to NL_NB neighbours along l at one i (contiguous in x: the inner
 *           loop vectorises);
 *   n == 1: up to NL_NB1 consecutive rows i, each a contiguous fiber (independent
 *           partial sums keep the adds pipelined; few enough rows that a
 *           power-of-two row length cannot thrash the L1 cache).
 * Group member q < nb owns s[s + q] and the fiber x[x + q*sq + j*sj], j < k.
 * Sums accumulate in double, always in the same order: results are reproducible. */
#pragma once
#include <stdint.h>

enum { NL_NB = 64, NL_NB1 = 8 };

struct nl_group { int64_t s, x, nb, sq, sj; };

static inline int64_t nl_ngroups(int64_t m, int64_t n)
{
    return n == 1 ? (m + NL_NB1 - 1) / NL_NB1 : m * ((n + NL_NB - 1) / NL_NB);
}

static inline struct nl_group nl_group_at(int64_t m, int64_t k, int64_t n, int64_t g)
{
    if (n == 1) {
        int64_t i0 = g * NL_NB1;
        return (struct nl_group){i0, i0 * k, m - i0 < NL_NB1 ? m - i0 : NL_NB1, k, 1};
    }
    int64_t per = (n + NL_NB - 1) / NL_NB, i = g / per, l0 = g % per * NL_NB;
    return (struct nl_group){i * n + l0, i * k * n + l0, n - l0 < NL_NB ? n - l0 : NL_NB, 1, n};
}

/* out[q] = alpha*acc[q] + beta*out[q]; beta == 0 overwrites without reading (BLAS rule) */
static inline void nl_store(int64_t nb, float alpha, float beta, const double *acc, float *out)
{
    for (int64_t q = 0; q < nb; q++)
        out[q] = (float)(alpha * acc[q] + (beta == 0.0f ? 0.0 : (double)beta * out[q]));
}

/* axis.c kernels that norm.c builds on */
void nl_sum_slice(int64_t m, int64_t k, int64_t n, float alpha, float beta, const float *x,
                  float *s);
