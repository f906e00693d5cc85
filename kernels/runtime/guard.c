/* The memory guard: no livelock between the RAM limit, the disk node and the
 * tasks.
 *
 * Out of core, a task runs with its tiles in RAM while clean tiles keep their disk
 * copy. When the tiles held fill RAM + disk node (or leave less than the working
 * sets of the tasks the workers run at once), a worker that must bring a tile
 * into RAM finds nothing it can evict (the disk node has no room either), and
 * StarPU retries forever: workers spin at 100 %, no task ends, the wait never
 * returns. So:
 *   - admission: a task is refused (-ENOMEM) when the live tiles plus the reserve
 *     — (workers + 1) working sets of the largest task submitted so far — exceed
 *     the capacity (RAM limit + disk node); Runtime checks the same reserve when
 *     it allocates a tensor, where it can first wait for freed tiles;
 *   - progress: every submission is counted, so that Python's watchdog can tell
 *     "no task ended and none was submitted for N seconds" with a memory node full
 *     (a livelock) from a long kernel, turn it into an error, refuse new tasks,
 *     and lend StarPU the memory it needs to drain what is queued (relieve) so the
 *     runtime can still be shut down.
 * Nothing here is specific to RAM: a node with its own memory (an accelerator)
 * gets the same guarantee by being counted in the capacity and checked by the
 * watchdog (starpu_memory_get_available per node). */
#include "internal.h"

#include <errno.h>

static int64_t capacity;        /* bytes the tiles may occupy; 0: no guard */
static int workers = 1;
static int64_t max_task;        /* largest working set submitted in this run */
static int64_t submitted;       /* tasks admitted, for the watchdog's progress */
static int stalled;             /* set by the watchdog: refuse every new task */
static int64_t refused_live, refused_task;
static int refused_op = -1;
static int64_t lent[STARPU_MAXNODES];   /* bytes lent per node (nl_guard_relieve) */

void nl_guard_set(int64_t capacity_bytes, int nworkers)
{
    capacity = capacity_bytes;
    workers = nworkers > 0 ? nworkers : 1;
    max_task = submitted = 0;
    stalled = 0;
    for (unsigned node = 0; node < STARPU_MAXNODES; node++)   /* a new StarPU, new counts */
        __atomic_store_n(&lent[node], 0, __ATOMIC_RELAXED);
    refused_op = -1;
}

int64_t nl_guard_reserve(int64_t task_bytes)
{
    int64_t largest = task_bytes > max_task ? task_bytes : max_task;
    return (int64_t)(workers + 1) * largest;
}

int64_t nl_guard_max_task(void) { return __atomic_load_n(&max_task, __ATOMIC_RELAXED); }

int64_t nl_guard_submitted(void) { return __atomic_load_n(&submitted, __ATOMIC_RELAXED); }

void nl_guard_stall(int on) { stalled = on; }

int nl_guard_stalled(void) { return stalled; }

int nl_guard_admit(struct starpu_task *task, int op_id)
{
    if (stalled) {
        refused_op = op_id;
        refused_task = refused_live = -1;
        return -ENOMEM;
    }
    int64_t bytes = 0;
    if (task->cl)
        for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
            bytes += (int64_t)starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
    if (capacity > 0) {
        int64_t live = __atomic_load_n(&nl_registered_bytes, __ATOMIC_RELAXED);
        if (live + nl_guard_reserve(bytes) > capacity) {
            refused_op = op_id;
            refused_task = bytes;
            refused_live = live;
            return -ENOMEM;
        }
    }
    if (bytes > max_task) __atomic_store_n(&max_task, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&submitted, 1, __ATOMIC_RELAXED);
    return 0;
}

/* What the last refusal saw: the op, its working set and the live tiles (-1, -1
 * when the runtime had stalled). */
int nl_guard_refused(int64_t *task_bytes, int64_t *live_bytes)
{
    *task_bytes = refused_task;
    *live_bytes = refused_live;
    return refused_op;
}

/* Lend a node `bytes` beyond its limit (StarPU's accounting only) so that the
 * queued tasks can get their tiles and end. Used once a stall is declared.
 * StarPU 1.3 counts a node's used bytes in a size_t that every free lowers: a loan
 * larger than what is in use, or one still out when the tiles are freed, wraps it
 * round, and from then on every allocation smaller than the excess fails forever (a
 * worker spinning in _starpu_allocate_memory_on_node, Runtime.stop() waiting in
 * starpu_data_unregister). So a loan never exceeds the bytes in use, and
 * nl_guard_repay takes every loan back before the tiles go. Returns the bytes lent. */
int64_t nl_guard_relieve(unsigned node, int64_t bytes)
{
    starpu_ssize_t total = starpu_memory_get_total(node);
    if (node >= STARPU_MAXNODES || total < 0) return 0;
    int64_t used = (int64_t)total - (int64_t)starpu_memory_get_available(node);
    if (bytes > used) bytes = used;
    if (bytes <= 0) return 0;
    starpu_memory_deallocate(node, (size_t)bytes);
    __atomic_add_fetch(&lent[node], bytes, __ATOMIC_RELAXED);
    return bytes;
}

/* Take back every loan (no task may be running: the caller has drained them), so that
 * freeing the tiles brings each node's used bytes to exactly zero. Returns the bytes. */
int64_t nl_guard_repay(void)
{
    int64_t total = 0;
    for (unsigned node = 0; node < STARPU_MAXNODES; node++) {
        int64_t bytes = __atomic_exchange_n(&lent[node], 0, __ATOMIC_RELAXED);
        if (bytes > 0) starpu_memory_allocate(node, (size_t)bytes, STARPU_MEMORY_OVERFLOW);
        total += bytes;
    }
    return total;
}
