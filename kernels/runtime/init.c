#include "internal.h"

#include <errno.h>
#include <string.h>
#ifdef NL_HAVE_OPENCL
#include "../opencl/launch.h"
extern const char nl_ocl_source[];   /* generated from kernels/opencl/*.cl */
#endif

#ifdef STARPU_USE_CUDA
#include <starpu_cublas.h>
static int cublas_on;   /* starpu_cublas_init ran for this runtime */
#endif

/* ---- runtime life cycle --------------------------------------------------- */
int nl_init(const char *sched, int ncpu, int nopencl, int ncuda, int profiling)
{
#ifndef NL_HAVE_OPENCL
    if (nopencl > 0) return -ENODEV;
#endif
#ifndef STARPU_USE_CUDA
    if (ncuda > 0) return -ENODEV;   /* Runtime says so first: this StarPU has no CUDA */
#endif
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.precedence_over_environment_variables = 1;
    conf.sched_policy_name = sched;
    conf.ncpus = ncpu;
    conf.ncuda = ncuda;
    conf.nopencl = nopencl;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    /* StarPU's own SIGINT/SIGSEGV handlers re-raise the signal after shutting
     * down the first runtime, which makes SIGINT hang any later runtime in the
     * process: Python's handler must stay the only one (Jupyter's interrupt). */
    conf.catch_signals = 0;
    /* Every model calibrates from the start (STARPU_CALIBRATE=2 still clears them). StarPU
     * 1.3 times a task only while its model is "benchmarking"; dm* schedulers switch that
     * flag on for an uncalibrated model while another task of the codelet runs, so that task
     * takes its end time but not its start (driver_common.c) and StarPU aborts on a
     * negative duration ("measured >= 0", seen in CI; upstream starpu issue #55).  With the
     * flag on from the start it never changes under a running task. */
    if (conf.calibrate < 1) conf.calibrate = 1;
    /* heteroprio: buckets that each kind of worker can serve (heteroprio.c) */
    int heteroprio = strcmp(sched, "heteroprio") == 0;
    if (heteroprio) conf.sched_policy_init = nl_heteroprio_init;
    nl_heteroprio_activate(0);
    int ret = starpu_init(&conf);
    if (ret) return ret;
    nl_heteroprio_activate(heteroprio);
#ifdef NL_HAVE_OPENCL
    /* the kernels, compiled for every OpenCL device once per runtime */
    if (nopencl > 0 && (ret = nl_ocl_load(nl_ocl_source))) {
        starpu_shutdown();
        return ret;
    }
#endif
#ifdef STARPU_USE_CUDA
    /* a cuBLAS handle per CUDA worker, bound to its stream (the gemm codelets use it) */
    if (ncuda > 0) starpu_cublas_init();
    cublas_on = ncuda > 0;
#endif
    nl_set_where(0);
    nl_set_scope(0, -1, 0);
    char stale[8];
    nl_take_error(stale, sizeof stale);
    nl_trace_clear();
    nl_tracing = 0;
    __atomic_store_n(&nl_registered_bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nl_freed_pending_bytes, 0, __ATOMIC_RELAXED);
    starpu_profiling_status_set(profiling ? STARPU_PROFILING_ENABLE : STARPU_PROFILING_DISABLE);
    return 0;
}

void nl_fini(void)
{
#ifdef NL_HAVE_OPENCL
    nl_ocl_unload();
#endif
#ifdef STARPU_USE_CUDA
    if (cublas_on) starpu_cublas_shutdown();
    cublas_on = 0;
#endif
    starpu_shutdown();
}

int nl_opencl_built(void)
{
#ifdef NL_HAVE_OPENCL
    return 1;
#else
    return 0;
#endif
}

int nl_opencl_devices(int accelerators_only)
{
#ifdef NL_HAVE_OPENCL
    return nl_ocl_devices(accelerators_only);
#else
    (void)accelerators_only;
    return 0;
#endif
}

int nl_opencl_memory_node(void)
{
    int ids[1];
    if (starpu_worker_get_ids_by_type(STARPU_OPENCL_WORKER, ids, 1) < 1) return -1;
    return (int)starpu_worker_get_memory_node((unsigned)ids[0]);
}

/* Whether this StarPU was built with CUDA (Debian's is not: scripts/build_starpu_cuda.sh) */
int nl_cuda_built(void)
{
#ifdef STARPU_USE_CUDA
    return 1;
#else
    return 0;
#endif
}

/* CUDA devices the driver shows (0 without CUDA, a driver or a GPU) */
int nl_cuda_devices(void)
{
#ifdef STARPU_USE_CUDA
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
#else
    return 0;
#endif
}

int nl_cuda_memory_node(void)
{
    int ids[1];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, 1) < 1) return -1;
    return (int)starpu_worker_get_memory_node((unsigned)ids[0]);
}

int nl_sched_policies(const char **names, int max)
{
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    int n = 0;
    for (; p[n] && n < max; n++) names[n] = p[n]->policy_name;
    return n;
}
