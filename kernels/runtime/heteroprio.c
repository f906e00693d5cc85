/* heteroprio's buckets on unlike workers (CPU cores + an accelerator: OpenCL devices or
 * CUDA GPUs).
 *
 * StarPU 1.3's heteroprio takes a task's priority as the index of a bucket; each kind
 * of worker walks its own ordered list of buckets, and every task in a bucket must be
 * runnable by every kind that walks it (StarPU asserts it at push: an abort). Without
 * a layout (no init callback) there is one bucket per priority, walked by every kind:
 * the first CPU-only task aborts a mixed runtime, and a priority is a bucket index.
 *
 * The layout here: three classes of tasks, by which kinds can run them (read from the
 * codelet at submission, so from the codelet table's `opencl=` / `cuda=` fields, and
 * narrowed by Runtime.on): CPU only, both (shared), accelerator only; each class has
 * LEVELS buckets, one per task priority (the model's priorities, nntile_lab.nn.priorities;
 * higher first, priorities above LEVELS - 1 share the top level). A CPU worker walks, from
 * the highest level down, its CPU-only bucket then the shared one; an accelerator worker
 * its accelerator-only bucket then the shared one. So a CPU core prefers what only it can
 * run, the device likewise, and both share the rest in priority order. One accelerator
 * kind per runtime (Runtime refuses heteroprio with OpenCL and CUDA workers together: a
 * shared bucket would then hold tasks one of the three kinds cannot run).
 *
 * Bucket 0 is (CPU only, level 0): StarPU's own tasks (priority 0) land there, and
 * every codelet here has a CPU function. */
#include "internal.h"

#include <starpu_heteroprio.h>

enum { CPU_ONLY, SHARED, DEVICE_ONLY };

/* 3 classes × LEVELS buckets must stay below STARPU_HETEROPRIO_MAX_PRIO (100) */
#define LEVELS 33

static int active;   /* the running runtime is heteroprio with this layout */

static unsigned bucket(int cls, int level) { return (unsigned)(cls * LEVELS + level); }

static void walk(unsigned ctx, enum starpu_heteroprio_types arch, int own)
{
    starpu_heteroprio_set_nb_prios(ctx, arch, 2 * LEVELS);
    unsigned idx = 0;
    for (int level = LEVELS - 1; level >= 0; level--) {
        starpu_heteroprio_set_mapping(ctx, arch, idx++, bucket(own, level));
        starpu_heteroprio_set_mapping(ctx, arch, idx++, bucket(SHARED, level));
    }
}

/* struct starpu_conf.sched_policy_init: StarPU calls it once the workers exist */
void nl_heteroprio_init(unsigned ctx)
{
    if (starpu_cpu_worker_get_count() > 0) walk(ctx, STARPU_CPU_IDX, CPU_ONLY);
    if (starpu_opencl_worker_get_count() > 0) walk(ctx, STARPU_OPENCL_IDX, DEVICE_ONLY);
    if (starpu_cuda_worker_get_count() > 0) walk(ctx, STARPU_CUDA_IDX, DEVICE_ONLY);
}

void nl_heteroprio_activate(int on) { active = on; }

int nl_heteroprio_levels(void) { return LEVELS; }

int nl_heteroprio_bucket_of(int kinds, int priority)
{
    int level = priority < 0 ? 0 : priority >= LEVELS ? LEVELS - 1 : priority;
    int device = kinds & (STARPU_OPENCL | STARPU_CUDA);
    int cls = device && (kinds & STARPU_CPU) ? SHARED : device ? DEVICE_ONLY : CPU_ONLY;
    return (int)bucket(cls, level);
}

int nl_heteroprio_priority(struct starpu_task *task, int priority)
{
    if (!active || !task->cl) return priority;
    /* the kinds that can run it: those with a function and workers, within task->where
     * (Runtime.on narrows it; -1: anywhere) */
    int where = task->where == -1 ? ~0 : task->where, kinds = 0;
    if ((where & STARPU_CPU) && task->cl->cpu_funcs[0] && starpu_cpu_worker_get_count() > 0)
        kinds |= STARPU_CPU;
    if ((where & STARPU_OPENCL) && task->cl->opencl_funcs[0]
        && starpu_opencl_worker_get_count() > 0)
        kinds |= STARPU_OPENCL;
    if ((where & STARPU_CUDA) && task->cl->cuda_funcs[0] && starpu_cuda_worker_get_count() > 0)
        kinds |= STARPU_CUDA;
    return nl_heteroprio_bucket_of(kinds, priority);
}
