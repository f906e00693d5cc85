/* Reductions along one axis of a tile viewed as (m, k, n) (kernels/cpu/axis.h) that are not
 * formulas: the max of a slice, and the sum of squares of a whole tile. Element (i, j, l)
 * sits at (i*k + j)*n + l, a slice value s[i*n + l] (one per fiber x[i, :, l]). The sums
 * along an axis and the broadcasts are formulas of the codelet table: generated
 * (formulas.cu). Blocks of threads cooperate on each result (common.cuh: nl_cu_geo). */
#include "common.cuh"

/* s[i,l] = max_j x[i,j,l], or max(s[i,l], that) when accumulate; a NaN wins. One block's
 * lanes per fiber (a max needs no chunks: many fibers to a tile where it runs) */
__global__ static void max_slice(const struct nl_cu_geo G, int64_t k, int64_t n,
                                 int32_t accumulate, const float *x, float *s)
{
    __shared__ float red[NL_CU_RED];
    const int r = nl_cu_result(G), q = nl_cu_lane(G);
    for (int64_t g = blockIdx.x; g < G.groups; g += gridDim.x) {
        const int64_t e = g * G.per + r;
        const int on = e < G.entries;
        const float *p = x + (on ? e / n * k * n + e % n : 0);
        float mx = -INFINITY;
        for (int64_t j = q; on && j < k; j += G.lanes) mx = nl_cu_max_nan(mx, p[j * n]);
        red[q * G.per + r] = mx;
        nl_cu_fold<NL_CU_MAX_NAN>(red, 1, G, q, r);
        if (on && q == 0) s[e] = accumulate ? nl_cu_max_nan(s[e], red[r]) : red[r];
        __syncthreads();
    }
}

const char *nl_cu_max_slice(cudaStream_t stream, int64_t m, int64_t k, int64_t n,
                            int32_t accumulate, const float *x, float *s)
{
    const struct nl_cu_geo G = nl_cu_geometry(m * n, k, n == 1, 1, NULL);
    if (G.entries <= 0) return NULL;
    NL_CU_RUN_COOP(max_slice, G, stream, G, k, n, accumulate, x, s);
    return nl_cu_launched();
}

/* s[0] = alpha · Σ_i x[i]² + beta · s[0]: the sum of squares of the (1, n, 1) view's one
 * slice — sumsq_slice's kernels, whose chunks spread a large tile over the GPU (n = 0:
 * s = beta·s) */
const char *nl_cu_sumsq_all(cudaStream_t stream, int64_t n, float alpha, float beta,
                            const float *x, float *s)
{
    return nl_cu_sumsq_slice(stream, 1, n, 1, alpha, beta, x, s);
}
