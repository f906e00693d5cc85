/* Batched matrix product with bfloat16 inputs and float32 accumulation and output, on
 * row-major tiles, through oneDNN's matmul (Debian libdnnl 2.6):
 *   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b],  b < batch
 * the same contract as nl_gemm (kernels/cpu/gemm.c) but A and B hold bf16.
 *
 * Why oneDNN: measured beside MKL's cblas_gemm_bf16bf16f32 and libxsmm 1.17 at one thread
 * on the model's shapes (BENCHMARKS.md, "bf16 GEMM library"); oneDNN's brgemm kernels
 * take any strides (so every trans_a/trans_b pair, no re-layout) and MKL does not use
 * AVX-512 BF16 on AMD CPUs.
 *
 * One thread per call: StarPU's workers are the parallelism, so each call sets its
 * worker thread's OpenMP team to 1 (oneDNN here is built on OpenMP). Safe from several
 * workers at once: the engine is shared (created once), every call has its own stream,
 * memory objects and scratchpad (user-managed scratchpad: oneDNN's library-managed
 * one may be shared between primitives), and oneDNN's primitive cache returns the
 * primitive of an already seen shape without compiling it again.
 *
 * Without AVX-512 (oneDNN 2.6 has no bf16 matmul for AVX2: "no primitive" in
 * BENCHMARKS.md), A and B are widened to float32, exactly, and go through nl_gemm: the
 * same products summed in float32, at sgemm's speed plus the O(mk + kn) widening. */
#include "prototypes.h"
#include "core.h"
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "onednn.h"

static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void)
{
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

/* C = alpha·op(A)·op(B) + beta·C through sgemm on float32 copies of A and B */
static void widened_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                         int32_t trans_b, float alpha, float beta, const uint16_t *a,
                         const uint16_t *b, float *c)
{
    int64_t na = batch * m * k, nb = batch * k * n;
    float *wa = malloc((size_t)(na + nb) * sizeof *wa);
    if (!wa) {
        nl_error("gemm_bf16: no memory for float32 copies of %lld + %lld values", (long long)na,
                 (long long)nb);
        return;
    }
    nl_bf16_to_f32(na, a, wa);
    nl_bf16_to_f32(nb, b, wa + na);
    nl_gemm(batch, m, n, k, trans_a, trans_b, alpha, beta, wa, wa + na, c);
    free(wa);
}

/* the primitive for one call shape; NULL (and *what set) on failure */
static dnnl_primitive_t make_primitive(int64_t batch, int64_t m, int64_t n, int64_t k,
                                       int ta, int tb, float alpha, float beta,
                                       dnnl_data_type_t c_type,
                                       dnnl_memory_desc_t *amd, dnnl_memory_desc_t *bmd,
                                       dnnl_memory_desc_t *cmd, size_t *scratch_bytes,
                                       const char **what)
{
    dnnl_dims_t ad = {batch, m, k}, bd = {batch, k, n}, cd = {batch, m, n};
    dnnl_dims_t as = {m * k, ta ? 1 : k, ta ? m : 1};
    dnnl_dims_t bs = {k * n, tb ? 1 : n, tb ? k : 1};
    dnnl_dims_t cs = {m * n, n, 1};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    *what = "memory descriptors";
    if (dnnl_memory_desc_init_by_strides(amd, 3, ad, dnnl_bf16, as)
        || dnnl_memory_desc_init_by_strides(bmd, 3, bd, dnnl_bf16, bs)
        || dnnl_memory_desc_init_by_strides(cmd, 3, cd, c_type, cs)
        || dnnl_matmul_desc_init(&desc, amd, bmd, NULL, cmd))
        return NULL;
    *what = "attributes (alpha, beta, scratchpad)";
    if (dnnl_primitive_attr_create(&attr)
        || dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    if (alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))
        goto out;
    if (beta != 0.0f
        && (dnnl_post_ops_create(&post) || dnnl_post_ops_append_sum(post, beta)
            || dnnl_primitive_attr_set_post_ops(attr, post)))
        goto out;
    *what = "matmul primitive descriptor";
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    if (st == dnnl_unimplemented)
        *what = NULL;   /* no bf16 matmul on this CPU (no AVX-512): not an error */
    if (st != dnnl_success)
        goto out;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    *what = "matmul primitive";
    if (dnnl_primitive_create(&prim, pd))
        prim = NULL;
out:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return prim;
}

/* C = alpha·op(A)·op(B) + beta·C with bf16 A and B through oneDNN's matmul, C of c_type
 * (float32, or bf16 rounded from the float32 sums). 0: done; 1: this CPU has no bf16 matmul
 * (the caller falls back); -1: failed, said (nl_error, reported when the runtime next waits;
 * C is left as it was). */
int nl_dnnl_gemm(const char *who, int64_t batch, int64_t m, int64_t n, int64_t k,
                 int32_t trans_a, int32_t trans_b, float alpha, float beta,
                 dnnl_data_type_t c_type, const uint16_t *a, const uint16_t *b, void *c)
{
    pthread_once(&engine_once, make_engine);
    if (engine_status != dnnl_success) {
        nl_error("%s: oneDNN cannot create its CPU engine (status %d)", who,
                 (int)engine_status);
        return -1;
    }
    omp_set_num_threads(1);
    dnnl_memory_desc_t amd, bmd, cmd, scratch_md;
    size_t scratch_bytes = 0;
    const char *what = "";
    dnnl_primitive_t prim = make_primitive(batch, m, n, k, trans_a != 0, trans_b != 0, alpha,
                                           beta, c_type, &amd, &bmd, &cmd, &scratch_bytes,
                                           &what);
    if (!prim && !what)
        return 1;
    if (!prim) {
        nl_error("%s: oneDNN could not make the %s for batch %lld, %lld×%lld×%lld "
                 "(trans_a=%d, trans_b=%d)", who, what, (long long)batch, (long long)m,
                 (long long)n, (long long)k, (int)trans_a, (int)trans_b);
        return -1;
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
        nl_error("%s: oneDNN failed to run the product of batch %lld, %lld×%lld×%lld "
                 "(out of memory for %zu bytes of scratchpad?)", who, (long long)batch,
                 (long long)m, (long long)n, (long long)k, scratch_bytes);
    if (ms) dnnl_memory_destroy(ms);
    if (mc) dnnl_memory_destroy(mc);
    if (mb) dnnl_memory_destroy(mb);
    if (ma) dnnl_memory_destroy(ma);
    if (stream) dnnl_stream_destroy(stream);
    free(scratch);
    dnnl_primitive_destroy(prim);
    return ok ? 0 : -1;
}

void nl_gemm_bf16(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                  int32_t trans_b, float alpha, float beta, const uint16_t *a, const uint16_t *b,
                  float *c)
{
    if (nl_dnnl_gemm("gemm_bf16", batch, m, n, k, trans_a, trans_b, alpha, beta, dnnl_f32, a,
                     b, c) == 1)
        widened_gemm(batch, m, n, k, trans_a, trans_b, alpha, beta, a, b, c);
}
