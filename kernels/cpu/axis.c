/* The reductions along one axis of a tile viewed as (m, k, n) (see axis.h) that are not
 * sums: the max of a slice, and the sum of squares of a whole tile. The sums along an axis
 * (sum_slice, sum_fiber, ...) and the broadcasts (add_slice, mul_fiber, ...) are formulas
 * of the codelet table: generated (kernels/formulas.py walks a tile as this file does). */
#include "prototypes.h"
#include <math.h>
#include <stdint.h>

#include "axis.h"

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], max_j x[i,j,l]) when accumulate.
 * -inf entries are ordinary values; a NaN wins, so it is not silently dropped. */
NL_INLINE void max_slice(struct nl_group G, int lanes, int32_t accumulate, const float *x,
                         float *s)
{
    float mx[NL_NB];
    nl_group_max(G, lanes, x, mx);
    float *o = s + G.s;
    for (int64_t q = 0; q < (lanes ? 1 : G.nb); q++)
        o[q] = (!accumulate || (mx[q] > o[q]) | (mx[q] != mx[q])) ? mx[q] : o[q];
}

void nl_max_slice(int64_t m, int64_t k, int64_t n, int32_t accumulate, const float *x, float *s)
{
    NL_FOR_GROUPS(m, k, n, max_slice, accumulate, x, s);
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]  (NL_NB partial sums: vectorised) */
void nl_sumsq_all(int64_t n, float alpha, float beta, const float *x, float *s)
{
    double acc[NL_NB] = {0}, total = 0;
    for (int64_t i0 = 0; i0 < n; i0 += NL_NB) {
        const float *p = x + i0;
        for (int64_t q = 0; q < (n - i0 < NL_NB ? n - i0 : NL_NB); q++)
            acc[q] += (double)p[q] * p[q];
    }
    for (int64_t q = 0; q < NL_NB; q++) total += acc[q];
    nl_store(1, alpha, beta, &total, s);
}
