/* Runtime glue: task scope, error channel, tile registration, task records.
 * One StarPU runtime exists per process (StarPU's own rule), so the state here
 * is per process; nl_reset() clears it when a Runtime starts. */
#define NL_WITH_STARPU
#include "core.h"
#include "api.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct { int priority, layer, phase; } scope;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char error_msg[512];
static int error_set;

void nl_error(const char *fmt, ...)
{
    pthread_mutex_lock(&error_lock);
    if (!error_set) {  /* keep the first: later ones are usually its echoes */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error_msg, sizeof error_msg, fmt, ap);
        va_end(ap);
        error_set = 1;
    }
    pthread_mutex_unlock(&error_lock);
}

int nl_take_error(char *buf, int len)
{
    pthread_mutex_lock(&error_lock);
    int had = error_set;
    if (had) snprintf(buf, (size_t)len, "%s", error_msg);
    error_set = 0;
    pthread_mutex_unlock(&error_lock);
    return had;
}

void nl_set_scope(int priority, int layer, int phase)
{
    scope.priority = priority;
    scope.layer = layer;
    scope.phase = phase;
}

/* ---- task records (traces without FxT) ------------------------------------
 * A C callback copies each finished task's profiling info into a growable
 * array; Python drains it. No Python code runs per task. */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nl_task_record *records;
static int64_t nrecords, records_cap;
static int tracing;

static double us(struct timespec t) { return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }

static void record_task(void *arg)
{
    struct starpu_task *task = starpu_task_get_current();
    struct starpu_profiling_task_info *p = task ? task->profiling_info : NULL;
    if (!p) return;
    struct nl_task_record r = {
        .op = (int)((intptr_t)arg & 0xffff),
        .phase = (int)(((intptr_t)arg >> 16) & 0xff),
        .layer = (int)((intptr_t)arg >> 24) - 1,
        .worker = p->workerid,
        .priority = task->priority,
        .submit_us = us(p->submit_time),
        .acquire_us = us(p->acquire_data_start_time),
        .start_us = us(p->start_time),
        .end_us = us(p->end_time),
        .flops = task->flops,
    };
    pthread_mutex_lock(&trace_lock);
    if (nrecords == records_cap) {
        int64_t cap = records_cap ? 2 * records_cap : 4096;
        struct nl_task_record *grown = realloc(records, (size_t)cap * sizeof *records);
        if (!grown) { pthread_mutex_unlock(&trace_lock); nl_error("trace: out of memory"); return; }
        records = grown;
        records_cap = cap;
    }
    records[nrecords++] = r;
    pthread_mutex_unlock(&trace_lock);
}

void nl_trace_enable(int on) { tracing = on; }

int64_t nl_trace_drain(struct nl_task_record *out, int64_t max)
{
    pthread_mutex_lock(&trace_lock);
    int64_t n = nrecords < max ? nrecords : max;
    memcpy(out, records, (size_t)n * sizeof *records);
    memmove(records, records + n, (size_t)(nrecords - n) * sizeof *records);
    nrecords -= n;
    pthread_mutex_unlock(&trace_lock);
    return n;
}

int64_t nl_trace_count(void) { return nrecords; }

int nl_submit_task(struct starpu_task *task, int op_id)
{
    task->priority = scope.priority;
    if (tracing) {
        task->callback_func = record_task;
        /* pack op, phase, layer into the pointer: no allocation per task */
        task->callback_arg = (void *)(intptr_t)(op_id | (scope.phase << 16)
                                                | ((intptr_t)(scope.layer + 1) << 24));
    }
    int ret = starpu_task_submit(task);
    if (ret) starpu_task_destroy(task);  /* frees cl_arg too */
    return ret;
}

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
    int ret = starpu_init(&conf);
    if (ret) return ret;
    nl_set_scope(0, -1, 0);
    char stale[8];
    nl_take_error(stale, sizeof stale);
    pthread_mutex_lock(&trace_lock);
    nrecords = 0;
    pthread_mutex_unlock(&trace_lock);
    tracing = profiling;
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

/* ---- tiles ------------------------------------------------------------------
 * Each tile is a StarPU vector registered with home node -1: StarPU allocates it
 * on first write, so it can later be evicted to disk (out-of-core). Reading a
 * tile never written would trip a StarPU assertion (an abort); with this init
 * codelet it reads as zeros instead. */
static void zero_tile(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
           (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

static struct starpu_codelet zero_cl = {
    .cpu_funcs = {zero_tile}, .nbuffers = 1, .modes = {STARPU_W}, .name = "zero_init"};

void nl_register_tiles(int64_t n, const int64_t *nelems, size_t elemsize,
                       starpu_data_handle_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        starpu_vector_data_register(&out[i], -1, 0, (uint32_t)nelems[i], elemsize);
        starpu_data_set_reduction_methods(out[i], NULL, &zero_cl);
    }
}

/* sync = 0: unregister once the tasks using the tiles are done, without
 * waiting (the usual free); sync = 1: now, blocking (runtime shutdown: StarPU
 * must have no pending request left when it stops). */
void nl_unregister_tiles(int64_t n, starpu_data_handle_t *handles, int sync)
{
    for (int64_t i = 0; i < n; i++)
        if (handles[i]) {
            if (sync)
                starpu_data_unregister(handles[i]);
            else
                starpu_data_unregister_submit(handles[i]);
            handles[i] = NULL;
        }
}

/* A disk memory node for out-of-core runs: StarPU evicts tiles there when the
 * RAM limit is reached. Returns the node id, or a negative errno. */
int nl_disk_register(const char *dir, int64_t bytes)
{
    return starpu_disk_register(&starpu_disk_unistd_ops, (void *)dir, bytes);
}
