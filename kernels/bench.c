/* The timing harness of `nntile-lab bench kernels` (nntile_lab/bench/kernels.py).
 *
 * Kernels are timed here, in C, by calling the kernel function itself (nl_call_op,
 * generated from the codelet table) `calls` times back to back on the same buffers,
 * rather than as StarPU tasks: a task adds a few µs of scheduling and data management
 * (the runtime's cost, which `bench schedulers` and the traces measure) and a Python
 * loop another µs per call, both of the order of a small tile's whole run time. One
 * thread, as one StarPU worker runs one task. The roofs are timed the same way in the
 * same run: STREAM copy and triad on one core and an exp throughput (below). */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <starpu.h>

#include "api.h"
#include "cpu/fastexp.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* keeps the compiler from merging or dropping the repeated calls */
#define NL_BARRIER() __asm__ volatile("" ::: "memory")

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* seconds for `calls` calls of op on pointers p and arguments a; < 0 for an unknown op.
 * *cpu_seconds: the calling thread's CPU time over the same calls — on a shared machine
 * the wall time also counts the time other processes had this core, and more of it the
 * longer a call runs (a call shorter than a scheduler slice is seldom preempted), so
 * wall-time rates of short and long calls are not comparable there; CPU-time ones are. */
double nl_time_op_cpu(int op, void **p, const double *a, int64_t calls, double *cpu_seconds)
{
    double c0 = thread_cpu(), t0 = now();
    for (int64_t c = 0; c < calls; c++) {
        if (nl_call_op(op, p, a)) return -1.0;
        NL_BARRIER();
    }
    double wall = now() - t0;
    *cpu_seconds = thread_cpu() - c0;
    return wall;
}

double nl_time_op(int op, void **p, const double *a, int64_t calls)
{
    double cpu;
    return nl_time_op_cpu(op, p, a, calls, &cpu);
}

/* STREAM on one core, n floats: kind 0 copy a = b (8 B per element moved), kind 1
 * triad a = b + 3·c (12 B); seconds for `calls` passes */
double nl_time_stream(int kind, int64_t n, float *a, const float *b, const float *c,
                      int64_t calls)
{
    double t0 = now();
    for (int64_t r = 0; r < calls; r++) {
        if (kind == 0)
            for (int64_t i = 0; i < n; i++) a[i] = b[i];
        else
            for (int64_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        NL_BARRIER();
    }
    return now() - t0;
}

/* The exp roof: kernels/cpu/fastexp.h's nl_expf (its range reduction and polynomial are
 * the same code, NL_EXP_REDUCED), written with GCC vector extensions on 8 lanes so that
 * it is vectorised whatever the auto-vectoriser does with the kernels: the throughput
 * that a kernel sitting on exp can reach at AVX2 width (gcc also emits 256-bit vectors
 * for AVX-512 machines unless told otherwise). y[i] = exp(x[i]) over n floats (n a
 * multiple of 8). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

NL_EXP_REDUCED(v8f, v_exp_reduced)

static inline v8f vsel(v8i m, v8f a, v8f b) { return (v8f)((m & (v8i)a) | (~m & (v8i)b)); }

static inline v8f v_expf(v8f x)
{
    const v8f lo = (v8f){0} - 87.33654f, hi = (v8f){0} + 88.0f;
    v8f xc = vsel(x < lo, lo, x);
    xc = vsel(xc > hi, hi, xc);
    v8f kf, p = v_exp_reduced(xc, &kf);
    v8i two_k = (__builtin_convertvector(kf, v8i) + 127) << 23;
    return (v8f)((v8i)(p * (v8f)two_k) & ~(x < lo));
}

double nl_time_vexp(int64_t n, const float *x, float *y, int64_t calls)
{
    double t0 = now();
    for (int64_t r = 0; r < calls; r++) {
        for (int64_t i = 0; i + 8 <= n; i += 8) {
            v8f v;
            memcpy(&v, x + i, sizeof v);
            v = v_expf(v);
            memcpy(y + i, &v, sizeof v);
        }
        NL_BARRIER();
    }
    return now() - t0;
}

/* the architecture flags the kernels were compiled with (NNTILE_LAB_CFLAGS at build time) */
const char *nl_build_cflags(void) { return NL_CFLAGS; }

/* the widest vector ISA the kernels were compiled for (NNTILE_LAB_CFLAGS) */
const char *nl_build_isa(void)
{
#if defined(__AVX512F__)
    return "avx512f";
#elif defined(__AVX2__) && defined(__FMA__)
    return "avx2+fma";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "sse2";
#endif
}
