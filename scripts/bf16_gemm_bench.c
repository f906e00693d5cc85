/* bf16 GEMM candidates side by side, one thread per call: GFLOP/s of
 *   C (m×n, fp32) = op(A) (m×k, bf16) · op(B) (k×n, bf16), fp32 accumulation
 * through MKL (cblas_gemm_bf16bf16f32), oneDNN (matmul primitive, created once per shape
 * and reused), libxsmm (JIT bsmm kernel), beside scipy-openblas32's sgemm on the same
 * shapes in fp32. Row-major, as the kernels store tiles. Each library's product is
 * checked against the fp32 sgemm of the same bf16-rounded inputs before it is timed.
 *
 * Build and run with scripts/bf16_gemm_bench.sh (it names the libraries and the ISA
 * switches). Output: one line per (library, shape, trans), median and spread of REPEATS
 * timings, each of enough calls to last ~0.15 s. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <libxsmm.h>

#define REPEATS 5

typedef uint16_t bf16;

static bf16 to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);   /* round to nearest even (no NaN in these data) */
    return (bf16)(u >> 16);
}

static float from_bf16(bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ---- MKL, loaded at run time (the wheel's libmkl_rt; MKL_THREADING_LAYER=SEQUENTIAL) */
typedef void (*mkl_bf16_fn)(int, int, int, int, int, int, float, const bf16 *, int,
                            const bf16 *, int, float, float *, int);
static mkl_bf16_fn mkl_gemm;

/* ---- oneDNN matmul, one primitive per call shape */
static dnnl_engine_t engine;
static dnnl_stream_t stream;

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} onednn_mm;

static int onednn_make(onednn_mm *mm, int m, int n, int k, int ta, int tb, const bf16 *a,
                       const bf16 *b, float *c)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
    dnnl_dims_t as = {ta ? 1 : k, ta ? m : 1}, bs = {tb ? 1 : n, tb ? k : 1};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    if (dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as)
        || dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs)
        || dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_f32, dnnl_ab)
        || dnnl_matmul_desc_init(&desc, &amd, &bmd, NULL, &cmd)
        || dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL))
        return -1;
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    fprintf(stderr, "  oneDNN %dx%dx%d ta=%d tb=%d: %s\n", m, n, k, ta, tb, impl);
    if (dnnl_primitive_create(&mm->prim, pd)) return -1;
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_create(&mm->a, &amd, engine, (void *)a);
    dnnl_memory_create(&mm->b, &bmd, engine, (void *)b);
    dnnl_memory_create(&mm->c, &cmd, engine, c);
    return 0;
}

static void onednn_run(onednn_mm *mm)
{
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mm->a}, {DNNL_ARG_WEIGHTS, mm->b},
                               {DNNL_ARG_DST, mm->c}};
    dnnl_primitive_execute(mm->prim, stream, 3, args);
    dnnl_stream_wait(stream);
}

/* ---- the shapes: the model's (T·B = 512 rows per tile, n_embd 768, MLP 3072,
 * a vocabulary tile 8192) */
static const int SHAPES[][3] = {{512, 512, 768}, {512, 768, 768}, {512, 2304, 768},
                                {512, 3072, 768}, {512, 768, 3072}, {512, 8192, 768}};
static const char *TRANS[] = {"NN", "NT", "TN"};

enum { OPENBLAS, MKL, ONEDNN, LIBXSMM, NLIB };
static const char *LIBNAME[] = {"openblas-sgemm", "mkl-bf16", "onednn-bf16", "libxsmm-bf16"};

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(void)
{
    scipy_openblas_set_num_threads(1);
    void *h = dlopen("libmkl_rt.so.3", RTLD_NOW);
    if (h) mkl_gemm = (mkl_bf16_fn)dlsym(h, "cblas_gemm_bf16bf16f32");
    if (!mkl_gemm) fprintf(stderr, "MKL: not found (%s): skipped\n", dlerror());
    dnnl_engine_create(&engine, dnnl_cpu, 0);
    dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    libxsmm_init();
    printf("%-15s %-16s %-2s %9s %9s %9s\n", "library", "m×n×k", "tr", "median", "min", "max");
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        int m = SHAPES[s][0], n = SHAPES[s][1], k = SHAPES[s][2];
        float *af = malloc(sizeof(float) * m * k), *bf = malloc(sizeof(float) * k * n);
        float *ref = malloc(sizeof(float) * m * n), *c = malloc(sizeof(float) * m * n);
        bf16 *a = malloc(2 * (size_t)m * k), *b = malloc(2 * (size_t)k * n);
        srand(1);
        for (int i = 0; i < m * k; i++) a[i] = to_bf16((float)rand() / RAND_MAX - 0.5f);
        for (int i = 0; i < k * n; i++) b[i] = to_bf16((float)rand() / RAND_MAX - 0.5f);
        for (int i = 0; i < m * k; i++) af[i] = from_bf16(a[i]);
        for (int i = 0; i < k * n; i++) bf[i] = from_bf16(b[i]);
        for (int t = 0; t < 3; t++) {
            /* all shapes NN; the transposed forms on the MLP shape (backward's dA, dB) */
            if (t && s != 3) continue;
            int ta = t == 2, tb = t == 1;
            int lda = ta ? m : k, ldb = tb ? k : n;
            scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, af, lda, bf, ldb,
                              0.0f, ref, n);
            for (int lib = 0; lib < NLIB; lib++) {
                onednn_mm mm;
                libxsmm_bsmmfunction xk = NULL;
                if (lib == MKL && !mkl_gemm) continue;
                if (lib == ONEDNN && onednn_make(&mm, m, n, k, ta, tb, a, b, c)) {
                    printf("%-15s %4dx%5dx%4d %-2s  no primitive\n", LIBNAME[lib], m, n, k,
                           TRANS[t]);
                    continue;
                }
                if (lib == LIBXSMM) {
                    /* column-major: Cᵀ (n×m) = Bᵀ·Aᵀ; libxsmm 1.17's bf16 kernels take no
                     * transposes and want the first operand in VNNI pairs, so only NN is
                     * timed, on a B that would need a re-layout first (its cost left out,
                     * its result not comparable: checked for running, not for values) */
                    float one = 1.0f, zero = 0.0f;
                    int flags = LIBXSMM_GEMM_FLAG_VNNI_A;
                    if (!ta && !tb)
                        xk = libxsmm_bsmmdispatch(n, m, k, &n, &k, &n, &one, &zero, &flags,
                                                  NULL);
                    if (!xk) {
                        printf("%-15s %4dx%5dx%4d %-2s  no kernel\n", LIBNAME[lib], m, n, k,
                               TRANS[t]);
                        continue;
                    }
                }
                double times[REPEATS];
                int calls = 0;
                for (int r = -1; r < REPEATS; r++) {   /* r = -1: warm-up, sizes the loop */
                    double t0 = now();
                    int todo = r < 0 ? 1 : calls;
                    for (int i = 0; i < todo; i++) {
                        switch (lib) {
                        case OPENBLAS:
                            scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                                              af, lda, bf, ldb, 0.0f, c, n);
                            break;
                        case MKL:
                            mkl_gemm(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.0f, a,
                                     lda, b, ldb, 0.0f, c, n);
                            break;
                        case ONEDNN: onednn_run(&mm); break;
                        case LIBXSMM: xk(b, a, c); break;
                        }
                    }
                    double dt = now() - t0;
                    if (r < 0) {
                        calls = (int)(0.15 / dt) + 1;
                        if (lib != LIBXSMM) {
                            double err = 0;
                            for (int i = 0; i < m * n; i++) err = fmax(err, fabs(c[i] - ref[i]));
                            if (err > 1e-3 * sqrt(k)) {
                                printf("%-15s %4dx%5dx%4d %-2s  WRONG (max error %g)\n",
                                       LIBNAME[lib], m, n, k, TRANS[t], err);
                                break;
                            }
                        }
                    } else {
                        times[r] = 2.0 * m * n * k * todo / dt * 1e-9;
                    }
                    if (r == REPEATS - 1) {
                        qsort(times, REPEATS, sizeof *times, cmp);
                        printf("%-15s %4dx%5dx%4d %-2s %9.1f %9.1f %9.1f\n", LIBNAME[lib], m,
                               n, k, TRANS[t], times[REPEATS / 2], times[0],
                               times[REPEATS - 1]);
                        fflush(stdout);
                    }
                }
                if (lib == ONEDNN) {
                    dnnl_primitive_destroy(mm.prim);
                    dnnl_memory_destroy(mm.a);
                    dnnl_memory_destroy(mm.b);
                    dnnl_memory_destroy(mm.c);
                }
            }
        }
        free(af), free(bf), free(ref), free(c), free(a), free(b);
    }
    return 0;
}
