/* Layout kernels on one tile, as kernels/cpu/layout.c: one thread per value. */
#include "common.cuh"

/* x (batch × m × n, rows from global row0, columns from col0): x[b, i, j] = value where
 * col0 + j > row0 + i (the causal mask) */
__global__ static void mask_causal(int64_t batch, int64_t m, int64_t n, int64_t row0,
                                   int64_t col0, float value, float *x)
{
    NL_CU_FOR(id, batch * m * n)
        if (col0 + id % n > row0 + id / n % m) x[id] = value;
}

const char *nl_cu_mask_causal(cudaStream_t stream, int64_t batch, int64_t m, int64_t n,
                              int64_t row0, int64_t col0, float value, float *x)
{
    NL_CU_LAUNCH(mask_causal, batch * m * n, stream, batch, m, n, row0, col0, value, x);
}

/* y (C order, n0 × … × n5)[a, b, c, d, e, f] = x[a·s0 + b·s1 + … + f·s5] */
struct dims { int64_t n[6], s[6]; };

__global__ static void permute(struct dims d, int64_t total, const float *x, float *y)
{
    NL_CU_FOR(id, total) {
        int64_t rest = id, src = 0;
        for (int ax = 5; ax >= 0; ax--) {
            src += rest % d.n[ax] * d.s[ax];
            rest /= d.n[ax];
        }
        y[id] = x[src];
    }
}

const char *nl_cu_permute(cudaStream_t stream, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                          int64_t n4, int64_t n5, int64_t s0, int64_t s1, int64_t s2,
                          int64_t s3, int64_t s4, int64_t s5, const float *x, float *y)
{
    struct dims d = {{n0, n1, n2, n3, n4, n5}, {s0, s1, s2, s3, s4, s5}};
    int64_t total = n0 * n1 * n2 * n3 * n4 * n5;
    NL_CU_LAUNCH(permute, total, stream, d, total, x, y);
}
