/* Task submission: the scope's priority and tags on every task, the refusal of a
 * task too big for the RAM limit (or, out of core, refused by the memory guard), the
 * task record when tracing. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

struct nl_scope nl_scope;

void nl_set_scope(int priority, int layer, int phase)
{
    nl_scope.priority = priority;
    nl_scope.layer = layer;
    nl_scope.phase = phase;
}

/* ---- one task's working set against the RAM limit -------------------------
 * A task runs with all its tiles in RAM at once. If they alone exceed the RAM
 * limit, StarPU can never run it and waits forever for memory (with a disk node
 * too: nothing to evict makes room). So such a task is refused at submission:
 * -E2BIG, with its bytes and op kept for the error message. 0: no limit. */
static int64_t task_bytes_limit;
static int64_t refused_bytes;
static int refused_op = -1;

void nl_set_task_bytes_limit(int64_t bytes) { task_bytes_limit = bytes; }

int64_t nl_refused_task(int *op_id)
{
    *op_id = refused_op;
    return refused_bytes;
}

static int too_big(struct starpu_task *task, int op_id)
{
    if (task_bytes_limit <= 0 || !task->cl) return 0;
    int64_t bytes = 0;
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
        bytes += (int64_t)starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
    if (bytes <= task_bytes_limit) return 0;
    refused_bytes = bytes;
    refused_op = op_id;
    return 1;
}

/* A task that was never submitted: free it and its cl_arg. starpu_task_create
 * makes tasks destroy=1, detach=1, which starpu_task_destroy refuses (assert). */
static void discard(struct starpu_task *task)
{
    task->destroy = 0;
    starpu_task_destroy(task);
}

/* ---- where tasks run ---------------------------------------------------------
 * 0: wherever the scheduler puts them; STARPU_CPU, STARPU_OPENCL or STARPU_CUDA: only there
 * (Runtime.on). A task whose codelet has no function for that kind is refused at
 * submission (-ENODEV, its op kept for the message): StarPU would abort on it. */
static int where;
static int unplaceable_op = -1;

void nl_set_where(int kind) { where = kind; }

int nl_unplaceable_op(void) { return unplaceable_op; }

static int cannot_run_there(struct starpu_task *task, int op_id)
{
    if (!where || !task->cl) return 0;
    int has = where == STARPU_OPENCL ? task->cl->opencl_funcs[0] != NULL
              : where == STARPU_CUDA ? task->cl->cuda_funcs[0] != NULL
                                     : task->cl->cpu_funcs[0] != NULL;
    if (has) return 0;
    unplaceable_op = op_id;
    return 1;
}

int nl_submit_task(struct starpu_task *task, int op_id)
{
    if (cannot_run_there(task, op_id)) {
        discard(task);
        return -ENODEV;
    }
    if (where) task->where = where;
    if (too_big(task, op_id)) {
        discard(task);
        return -E2BIG;
    }
    int refused = nl_guard_admit(task, op_id);   /* guard.c */
    if (refused) {
        discard(task);
        return refused;
    }
    task->priority = nl_scope.priority;
    struct nl_task_record *r = NULL;
    if (nl_tracing && (r = nl_record_new(task, op_id))) {
        task->callback_func = nl_record_task;
        task->callback_arg = r;
    }
    int ret = starpu_task_submit(task);
    if (ret) {
        free(r);
        discard(task);
    }
    return ret;
}
