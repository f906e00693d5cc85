/* Task submission: the scope's priority and tags on every task, the refusal of a
 * task too big for the RAM limit or for an OpenCL device's cap (or, out of core,
 * refused by the memory guard), the task record when tracing. */
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

/* ---- one task's working set against the device's cap -------------------------
 * A task on an accelerator (OpenCL or CUDA worker) runs with all its tiles in the
 * device's memory at once. If they exceed the device's limit, StarPU evicts and retries
 * forever (a hang, checked with StarPU 1.3.10 on PoCL). So a task that may run on the
 * device (its codelet has a function for a kind of accelerator the runtime has, and it is
 * not confined to the CPU) and is bigger than the limit is refused at submission:
 * -EFBIG, with its bytes, its largest tile and its op kept for the error message.
 * 0: no accelerator worker. The limit is the device's cap over the tasks a worker holds
 * at once (Runtime sets it: runtime.device_tasks_in_flight). */
static int64_t device_task_limit;
static int64_t device_refused_bytes, device_refused_tile;
static int device_refused_op = -1;

void nl_set_device_task_limit(int64_t bytes) { device_task_limit = bytes; }

int64_t nl_device_refused_task(int *op_id, int64_t *largest_tile)
{
    *op_id = device_refused_op;
    *largest_tile = device_refused_tile;
    return device_refused_bytes;
}

static int too_big_for_device(struct starpu_task *task, int op_id, int where_now)
{
    if (device_task_limit <= 0 || !task->cl || where_now == STARPU_CPU) return 0;
    int on_opencl = task->cl->opencl_funcs[0] && starpu_opencl_worker_get_count() > 0;
    int on_cuda = task->cl->cuda_funcs[0] && starpu_cuda_worker_get_count() > 0;
    if (!on_opencl && !on_cuda) return 0;
    int64_t bytes = 0, largest = 0;
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++) {
        int64_t b = (int64_t)starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
        bytes += b;
        if (b > largest) largest = b;
    }
    if (bytes <= device_task_limit) return 0;
    device_refused_bytes = bytes;
    device_refused_tile = largest;
    device_refused_op = op_id;
    return 1;
}

/* ---- where tasks run ---------------------------------------------------------
 * 0: wherever the scheduler puts them; STARPU_CPU, STARPU_OPENCL or STARPU_CUDA: only
 * there (Runtime.on). A task whose codelet has no function for that kind goes to the
 * fallback kind (0: any worker) if one is set, else is refused at submission (-ENODEV,
 * its op kept for the message): StarPU would abort on it. Setting where clears the
 * fallback (-1: none). */
static int where;
static int fallback = -1;
static int unplaceable_op = -1;

void nl_set_where(int kind)
{
    where = kind;
    fallback = -1;
}

void nl_set_where_fallback(int kind) { fallback = kind; }

int nl_unplaceable_op(void) { return unplaceable_op; }

static int runs_on(const struct starpu_codelet *cl, int kind)
{
    return kind == STARPU_OPENCL ? cl->opencl_funcs[0] != NULL
         : kind == STARPU_CUDA   ? cl->cuda_funcs[0] != NULL
         : kind == STARPU_CPU    ? cl->cpu_funcs[0] != NULL : 1;
}

/* the kind of worker the task is confined to (0: none), or -1 when it cannot run there */
static int placement(struct starpu_task *task, int op_id)
{
    if (!where || !task->cl || runs_on(task->cl, where)) return where;
    if (fallback >= 0 && runs_on(task->cl, fallback)) return fallback;
    unplaceable_op = op_id;
    return -1;
}

int nl_submit_task(struct starpu_task *task, int op_id)
{
    int kind = placement(task, op_id);
    if (kind < 0) {
        discard(task);
        return -ENODEV;
    }
    if (kind) task->where = kind;
    if (too_big(task, op_id)) {
        discard(task);
        return -E2BIG;
    }
    if (too_big_for_device(task, op_id, kind)) {
        discard(task);
        return -EFBIG;
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
    /* the record keeps the model's priority; heteroprio takes a bucket (heteroprio.c) */
    task->priority = nl_heteroprio_priority(task, task->priority);
    int ret = starpu_task_submit(task);
    if (ret) {
        free(r);
        discard(task);
    }
    return ret;
}
