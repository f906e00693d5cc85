/* Layout kernels on one tile: causal mask and axis permutation. */
#include "prototypes.h"
#include <stdint.h>

/* x has batch × m × n values (C order); its rows start at global row row0, its
 * columns at col0:  x[b, i, j] = value where col0 + j > row0 + i */
void nl_mask_causal(int64_t batch, int64_t m, int64_t n, int64_t row0, int64_t col0,
                    float value, float *x)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < m; i++) {
            int64_t j0 = row0 + i + 1 - col0;  /* first masked column of row i */
            float *row = x + (b * m + i) * n;
            for (int64_t j = j0 < 0 ? 0 : j0; j < n; j++) row[j] = value;
        }
}

/* y (C order, shape n0 × … × n5) takes y[a, b, c, d, e, f] = x[a·s0 + b·s1 + … + f·s5]:
 * s_k is x's stride along the axis that becomes y's axis k (fewer axes: n = 1, s = 0). */
void nl_permute(int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5,
                int64_t s0, int64_t s1, int64_t s2, int64_t s3, int64_t s4, int64_t s5,
                const float *x, float *y)
{
    for (int64_t a = 0; a < n0; a++)
        for (int64_t b = 0; b < n1; b++)
            for (int64_t c = 0; c < n2; c++)
                for (int64_t d = 0; d < n3; d++)
                    for (int64_t e = 0; e < n4; e++) {
                        const float *src = x + a * s0 + b * s1 + c * s2 + d * s3 + e * s4;
                        for (int64_t f = 0; f < n5; f++) *y++ = src[f * s5];
                    }
}
