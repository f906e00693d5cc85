/* Standalone reproducer: scipy-openblas32 0.3.34 sgemm(Trans, Trans) is not safe to
 * call from two threads at once (one OpenBLAS thread each), which is how StarPU's
 * workers call it. Each thread multiplies its own all-ones matrices; a correct BLAS
 * never prints "bad". Seen 2026-11-24 on Intel Xeon (family 6 model 167) with both
 * OPENBLAS_CORETYPE=Haswell and the native SkylakeX code: wrong products (~1e-4 of
 * calls at sizes 1..130) and glibc heap aborts; NN, NT and TN: 0 in 800 000 calls.
 *
 *   D=$(.venv/bin/python -c 'import scipy_openblas32 as s; print(s.get_lib_dir())')
 *   gcc -O2 -I$D/../include scripts/openblas_tt_race.c -L$D -lscipy_openblas \
 *       -Wl,-rpath,$D -lpthread -o /tmp/tt_race && /tmp/tt_race 1 9 1 1 400000
 * arguments: smallest and largest size, trans_a, trans_b, calls per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "cblas.h"

extern void scipy_openblas_set_num_threads(int);
static int lo, hi, ta, tb;
static long iters, bad;

static void *run(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    for (long it = 0; it < iters; it++) {
        int m = lo + rand_r(&seed) % (hi - lo + 1), n = lo + rand_r(&seed) % (hi - lo + 1),
            k = lo + rand_r(&seed) % (hi - lo + 1);
        float *a = malloc(4 * m * k), *b = malloc(4 * k * n), *c = malloc(4 * m * n);
        for (int i = 0; i < m * k; i++) a[i] = 1;
        for (int i = 0; i < k * n; i++) b[i] = 1;
        for (int i = 0; i < m * n; i++) c[i] = 1;
        scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                          tb ? CblasTrans : CblasNoTrans, m, n, k, -0.5f, a, ta ? m : k, b,
                          tb ? k : n, 1.0f, c, n);
        for (int i = 0; i < m * n; i++)
            if (c[i] != 1.0f - 0.5f * k) {
                if (__sync_fetch_and_add(&bad, 1) < 5) printf("bad: m=%d n=%d k=%d\n", m, n, k);
                break;
            }
        free(a); free(b); free(c);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) { fprintf(stderr, "usage: %s lo hi trans_a trans_b calls\n", argv[0]); return 2; }
    lo = atoi(argv[1]); hi = atoi(argv[2]); ta = atoi(argv[3]); tb = atoi(argv[4]);
    iters = atol(argv[5]);
    scipy_openblas_set_num_threads(1);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, run, (void *)(i + 1));
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("sizes %d..%d trans_a=%d trans_b=%d: %ld wrong of %ld\n", lo, hi, ta, tb, bad, 2 * iters);
    return bad != 0;
}
