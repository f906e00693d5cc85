/* What the runtime glue's files share with each other, and nothing the Python side
 * calls (that is api.h). One StarPU runtime exists per process (StarPU's own rule),
 * so the state here is per process; nl_init() clears it when a Runtime starts.
 *
 * The files, one concern each: errors.c (the error channel), submit.c (scope and
 * task submission), records.c (task records for traces), stats.c (worker and bus
 * counters), sampler.c (memory sampler), init.c (runtime life cycle), tiles.c (tile
 * registry), wait.c (waits Python can interrupt), disk.c (the out-of-core disk
 * node), hints.c (memory hints), buffer_cache.c (tile buffers kept for reuse),
 * rss.c (honest RSS under a cap), guard.c (the memory guard: no livelock out of core),
 * heteroprio.c (heteroprio's buckets on unlike workers), perfmodels.c (what the
 * performance models learned). */
#pragma once
#define NL_WITH_STARPU
#include "core.h"
#include "api.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* shared between the files only: not exported from the extension */
#pragma GCC visibility push(hidden)

/* The Python side's Runtime.scope: every task submitted takes its priority, and its
 * record the layer and phase tags (submit.c). */
extern struct nl_scope { int priority, layer, phase; } nl_scope;

/* Task records are taken while set (records.c; nl_submit_task reads it). */
extern int nl_tracing;
/* A record of what is known of a task at submission, or NULL if out of memory ... */
struct nl_task_record *nl_record_new(struct starpu_task *task, int op_id);
/* ... completed with its profiling times by this callback when the task ends. */
void nl_record_task(void *arg);

/* Bytes of the tiles registered and not yet unregistered, and of those freed while
 * their tasks were pending (tiles.c; the sampler, waits and init read them). */
extern int64_t nl_registered_bytes, nl_freed_pending_bytes;

/* The memory guard's admission of a task (guard.c; nl_submit_task calls it): 0, or
 * -ENOMEM when its working set could not move between RAM and the disk node. */
int nl_guard_admit(struct starpu_task *task, int op_id);

/* The priority a task is submitted with: ``priority`` itself, or under heteroprio the
 * bucket of its class and priority level (heteroprio.c). */
int nl_heteroprio_priority(struct starpu_task *task, int priority);
/* heteroprio's bucket layout (heteroprio.c): starpu_conf.sched_policy_init, and whether
 * the running runtime uses it. */
void nl_heteroprio_init(unsigned ctx);
void nl_heteroprio_activate(int on);

/* The ops of the codelet table and each one's performance model (generated). */
int nl_op_count(void);
struct starpu_perfmodel *nl_op_model(int i);

#pragma GCC visibility pop

/* A timespec in µs. */
static inline double nl_us(struct timespec t) { return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }

/* Room for element n of a growable array (under its lock); 0 if out of memory. */
static inline int nl_grow(void **array, int64_t *cap, int64_t n, size_t size)
{
    if (n < *cap) return 1;
    int64_t c = *cap ? 2 * *cap : 4096;
    void *grown = realloc(*array, (size_t)c * size);
    if (!grown) return 0;
    *array = grown;
    *cap = c;
    return 1;
}
