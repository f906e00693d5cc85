#include "internal.h"

/* ---- runtime life cycle --------------------------------------------------- */
int nl_init(const char *sched, int ncpu, int profiling)
{
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.precedence_over_environment_variables = 1;
    conf.sched_policy_name = sched;
    conf.ncpus = ncpu;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    /* StarPU's own SIGINT/SIGSEGV handlers re-raise the signal after shutting
     * down the first runtime, which makes SIGINT hang any later runtime in the
     * process: Python's handler must stay the only one (Jupyter's interrupt). */
    conf.catch_signals = 0;
    int ret = starpu_init(&conf);
    if (ret) return ret;
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

int nl_sched_policies(const char **names, int max)
{
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    int n = 0;
    for (; p[n] && n < max; n++) names[n] = p[n]->policy_name;
    return n;
}
