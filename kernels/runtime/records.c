#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- task records (traces without FxT) ------------------------------------
 * nl_submit_task fills a record with what is known at submission (op, scope,
 * flops, the handles and their access modes, their bytes) while the handles
 * are surely alive; a C callback adds the profiling times when the task ends
 * and moves the record into a growable array that Python drains. No Python
 * code runs per task. Records are taken only while a Trace is active. */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nl_task_record *records;
static int64_t nrecords, records_cap;
int nl_tracing;
static int64_t next_task_id;   /* submission order, for the dependency graph */

void nl_record_task(void *arg)
{
    struct nl_task_record *r = arg;
    struct starpu_task *task = starpu_task_get_current();
    struct starpu_profiling_task_info *p = task ? task->profiling_info : NULL;
    if (p) {  /* NULL when profiling was off as the task was submitted */
        r->worker = p->workerid;
        r->submit_us = nl_us(p->submit_time);
        r->ready_us = nl_us(p->push_start_time);
        r->acquire_us = nl_us(p->acquire_data_end_time);
        r->start_us = nl_us(p->start_time);
        r->end_us = nl_us(p->end_time);
        pthread_mutex_lock(&trace_lock);
        if (nl_grow((void **)&records, &records_cap, nrecords, sizeof *records))
            records[nrecords++] = *r;
        else
            nl_error("trace: out of memory for task records");
        pthread_mutex_unlock(&trace_lock);
    }
    free(r);
}

struct nl_task_record *nl_record_new(struct starpu_task *task, int op_id)
{
    struct nl_task_record *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->task_id = __atomic_fetch_add(&next_task_id, 1, __ATOMIC_RELAXED);
    r->op = op_id;
    r->phase = nl_scope.phase;
    r->layer = nl_scope.layer;
    r->priority = task->priority;
    r->flops = task->flops;
    unsigned n = STARPU_TASK_GET_NBUFFERS(task);
    r->nbuffers = n < 8 ? (int)n : 8;
    for (int i = 0; i < r->nbuffers; i++) {
        starpu_data_handle_t h = STARPU_TASK_GET_HANDLE(task, i);
        r->handles[i] = (uint64_t)(uintptr_t)h;
        r->modes[i] = (int)STARPU_TASK_GET_MODE(task, i);
        r->bytes += (double)starpu_data_get_size(h);
    }
    return r;
}

void nl_trace_enable(int on) { nl_tracing = on; }

void nl_trace_clear(void)
{
    pthread_mutex_lock(&trace_lock);
    nrecords = 0;
    pthread_mutex_unlock(&trace_lock);
}

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

int64_t nl_trace_count(void)
{
    pthread_mutex_lock(&trace_lock);
    int64_t n = nrecords;
    pthread_mutex_unlock(&trace_lock);
    return n;
}
