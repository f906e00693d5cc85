/* Matrix products whose output C is stored in bf16, for the bf16 precision modes' LM head
 * (nn/precision.py): the logits, B·T·V values, are a step's largest tensor, and storing
 * them in bf16 halves what a step moves to disk out of core. Same contract as nl_gemm
 * (kernels/cpu/gemm.c) with beta = 0 (C is written, never read):
 *   C[b] = bf16(alpha · op(A[b]) · op(B[b])),  b < batch
 * products summed in float32 and rounded once, to nearest even, when stored.
 *
 *   nl_gemm_bf16_c16: A and B bf16 (mode bf16). oneDNN's matmul writes the bf16 C
 *     itself from its float32 accumulators (no float32 C anywhere). Its own engine and
 *     primitive set-up, like gemm_bf16.c's (whose primitives write float32): one thread
 *     per call, a stream, memory objects and scratchpad per call, so it is safe from
 *     several workers at once. Without AVX-512 BF16 (oneDNN 2.6: no bf16 matmul),
 *     nl_gemm_bf16's float32 result in a scratch buffer, then rounded.
 *   nl_gemm_c16: A and B float32 (mode bf16-storage: float32 compute): sgemm into a
 *     scratch buffer, then rounded. The float32 C lives only inside the task, so it is
 *     never a StarPU tile, never counted in the RAM cap and never evicted.
 * And nl_gemm_a16, the backward's product of that bf16 tensor (A) with float32 B (below). */
#include "prototypes.h"
#include "bf16.h"
#include "core.h"
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <oneapi/dnnl/dnnl.h>

static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void)
{
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

/* A float32 scratch (C, or a widened A); NULL (error said) without memory */
static float *scratch_c(const char *who, int64_t values)
{
    float *c = malloc((size_t)values * sizeof *c);
    if (!c)
        nl_error("%s: no memory for a float32 scratch of %lld values", who, (long long)values);
    return c;
}

void nl_gemm_c16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, const float *a, const float *b, uint16_t *c)
{
    float *c32 = scratch_c("gemm_c16", batch * m * n);
    if (!c32) return;
    nl_gemm(batch, m, n, k, trans_a, trans_b, alpha, 0.0f, a, b, c32);
    nl_f32_to_bf16(batch * m * n, c32, c);
    free(c32);
}

/* C = alpha·op(A)·op(B) + beta·C with A bf16 and B, C float32: A widened (exactly) into a
 * scratch of the task's own, then sgemm. The bf16-storage mode's LM head backward reads the
 * bf16 logits' gradient this way, so no float32 copy of it is ever a StarPU tile. */
void nl_gemm_a16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, float beta, const uint16_t *a, const float *b,
                 float *c)
{
    float *a32 = scratch_c("gemm_a16", batch * m * k);
    if (!a32) return;
    nl_bf16_to_f32(batch * m * k, a, a32);
    nl_gemm(batch, m, n, k, trans_a, trans_b, alpha, beta, a32, b, c);
    free(a32);
}

/* nl_gemm_bf16 into float32, then rounded: where oneDNN has no bf16 matmul */
static void rounded_gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                              int32_t trans_b, float alpha, const uint16_t *a,
                              const uint16_t *b, uint16_t *c)
{
    float *c32 = scratch_c("gemm_bf16_c16", batch * m * n);
    if (!c32) return;
    nl_gemm_bf16(batch, m, n, k, trans_a, trans_b, alpha, 0.0f, a, b, c32);
    nl_f32_to_bf16(batch * m * n, c32, c);
    free(c32);
}

/* the primitive for one call shape, bf16 in and out; NULL (and *what set) on failure,
 * *what NULL when this CPU has no bf16 matmul */
static dnnl_primitive_t make_primitive(int64_t batch, int64_t m, int64_t n, int64_t k,
                                       int ta, int tb, float alpha, dnnl_memory_desc_t *amd,
                                       dnnl_memory_desc_t *bmd, dnnl_memory_desc_t *cmd,
                                       size_t *scratch_bytes, const char **what)
{
    dnnl_dims_t ad = {batch, m, k}, bd = {batch, k, n}, cd = {batch, m, n};
    dnnl_dims_t as = {m * k, ta ? 1 : k, ta ? m : 1};
    dnnl_dims_t bs = {k * n, tb ? 1 : n, tb ? k : 1};
    dnnl_dims_t cs = {m * n, n, 1};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    *what = "memory descriptors";
    if (dnnl_memory_desc_init_by_strides(amd, 3, ad, dnnl_bf16, as)
        || dnnl_memory_desc_init_by_strides(bmd, 3, bd, dnnl_bf16, bs)
        || dnnl_memory_desc_init_by_strides(cmd, 3, cd, dnnl_bf16, cs)
        || dnnl_matmul_desc_init(&desc, amd, bmd, NULL, cmd))
        return NULL;
    *what = "attributes (alpha, scratchpad)";
    if (dnnl_primitive_attr_create(&attr)
        || dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    if (alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))
        goto out;
    *what = "matmul primitive descriptor";
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    if (st == dnnl_unimplemented)
        *what = NULL;
    if (st != dnnl_success)
        goto out;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    *what = "matmul primitive";
    if (dnnl_primitive_create(&prim, pd))
        prim = NULL;
out:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return prim;
}

void nl_gemm_bf16_c16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                      int32_t trans_b, float alpha, const uint16_t *a, const uint16_t *b,
                      uint16_t *c)
{
    pthread_once(&engine_once, make_engine);
    if (engine_status != dnnl_success) {
        nl_error("gemm_bf16_c16: oneDNN cannot create its CPU engine (status %d)",
                 (int)engine_status);
        return;
    }
    omp_set_num_threads(1);
    dnnl_memory_desc_t amd, bmd, cmd, scratch_md;
    size_t scratch_bytes = 0;
    const char *what = "";
    dnnl_primitive_t prim = make_primitive(batch, m, n, k, trans_a != 0, trans_b != 0, alpha,
                                           &amd, &bmd, &cmd, &scratch_bytes, &what);
    if (!prim && !what) {
        rounded_gemm_bf16(batch, m, n, k, trans_a, trans_b, alpha, a, b, c);
        return;
    }
    if (!prim) {
        nl_error("gemm_bf16_c16: oneDNN could not make the %s for batch %lld, "
                 "%lld×%lld×%lld (trans_a=%d, trans_b=%d)", what, (long long)batch,
                 (long long)m, (long long)n, (long long)k, (int)trans_a, (int)trans_b);
        return;
    }
    void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, ms = NULL;
    dnnl_dims_t sd = {(dnnl_dim_t)scratch_bytes};
    int ok = (!scratch_bytes || scratch)
        && !dnnl_stream_create(&stream, engine, dnnl_stream_default_flags)
        && !dnnl_memory_create(&ma, &amd, engine, (void *)a)
        && !dnnl_memory_create(&mb, &bmd, engine, (void *)b)
        && !dnnl_memory_create(&mc, &cmd, engine, c)
        && (!scratch_bytes
            || (!dnnl_memory_desc_init_by_tag(&scratch_md, 1, sd, dnnl_u8, dnnl_a)
                && !dnnl_memory_create(&ms, &scratch_md, engine, scratch)));
    if (ok) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb},
                                   {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, ms}};
        ok = !dnnl_primitive_execute(prim, stream, scratch_bytes ? 4 : 3, args)
             && !dnnl_stream_wait(stream);
    }
    if (!ok)
        nl_error("gemm_bf16_c16: oneDNN failed to run the product of batch %lld, "
                 "%lld×%lld×%lld (out of memory for %zu bytes of scratchpad?)",
                 (long long)batch, (long long)m, (long long)n, (long long)k, scratch_bytes);
    if (ms) dnnl_memory_destroy(ms);
    if (mc) dnnl_memory_destroy(mc);
    if (mb) dnnl_memory_destroy(mb);
    if (ma) dnnl_memory_destroy(ma);
    if (stream) dnnl_stream_destroy(stream);
    free(scratch);
    dnnl_primitive_destroy(prim);
}
