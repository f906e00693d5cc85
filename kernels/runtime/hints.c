#include "internal.h"

#include <errno.h>
#include <stdlib.h>

/* ---- memory hints -------------------------------------------------------------
 * kind 0: invalidate once the tasks submitted so far are done (the contents are
 * dead: never written back to disk); 1: wont_use (evict first when memory is
 * short); 2: prefetch into RAM (node 0) asynchronously. */
void nl_hint_tiles(int64_t n, starpu_data_handle_t *handles, int kind)
{
    for (int64_t i = 0; i < n; i++) {
        if (!handles[i]) continue;
        if (kind == 0)
            starpu_data_invalidate_submit(handles[i]);
        else if (kind == 1)
            starpu_data_wont_use(handles[i]);
        else
            starpu_data_prefetch_on_node(handles[i], STARPU_MAIN_RAM, 1);
    }
}

/* The same hints, deferred: issued once the tasks submitted so far that write
 * ``trigger`` are done (an acquire in R mode on no node, so the trigger is not
 * fetched, released at once). A prefetch issued at submission time would fire at once,
 * since a whole step is submitted ahead of its execution; tied to a tile the previous
 * stage writes, it fires when that stage ends. StarPU's own wont_use issues its disk
 * prefetch from such a callback.
 * A wont_use also holds each hinted tile (the same R acquire on no node) until it is
 * issued: a tile whose last reader runs before the trigger is written would otherwise be
 * unregistered under the pending hint, and StarPU aborts on the dead handle (seen with
 * bf16-storage: its backward widens a block's saved tensors as soon as it is submitted,
 * long before the forward's last tile is done). The hold delays only a later writer of
 * the tile: the wont_use tiles (saved activations, a block's parameters and gradients)
 * have none before the optimizer, after the whole backward. The hint fires when the
 * trigger and every hold are acquired, whichever comes last. Prefetches (parameters and
 * optimizer state, registered for the whole run) are not held: a hold would order each
 * optimizer update after the previous one. */
struct nl_hint_job {
    starpu_data_handle_t trigger;
    int kind;
    int64_t n;
    int64_t pending;          /* acquisitions not yet granted, plus the submission's own */
    starpu_data_handle_t h[];
};

static void nl_hint_fire(void *arg)
{
    struct nl_hint_job *job = arg;
    if (__atomic_sub_fetch(&job->pending, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (int64_t i = 0; i < job->n; i++) {
        if (job->kind == 1)
            starpu_data_wont_use(job->h[i]);
        else
            starpu_data_prefetch_on_node(job->h[i], STARPU_MAIN_RAM, 1);
    }
    if (job->kind == 1)
        for (int64_t i = 0; i < job->n; i++)
            starpu_data_release_on_node(job->h[i], STARPU_ACQUIRE_NO_NODE);
    free(job);
}

static void nl_hint_trigger_done(void *arg)
{
    struct nl_hint_job *job = arg;
    starpu_data_release_on_node(job->trigger, STARPU_ACQUIRE_NO_NODE);
    nl_hint_fire(job);
}

int nl_hint_after(starpu_data_handle_t trigger, int64_t n, starpu_data_handle_t *handles,
                  int kind)
{
    if (kind != 1 && kind != 2) return -EINVAL;
    struct nl_hint_job *job = malloc(sizeof *job + n * sizeof(starpu_data_handle_t));
    if (!job) return -ENOMEM;
    job->trigger = trigger;
    job->kind = kind;
    job->n = 0;
    for (int64_t i = 0; i < n; i++)
        if (handles[i]) job->h[job->n++] = handles[i];
    int64_t holds = kind == 1 ? job->n : 0;
    /* the submission's own count keeps the job from firing before every acquire is made */
    job->pending = holds + 2;
    for (int64_t i = 0; i < holds; i++)   /* StarPU returns 0 for a registered handle */
        starpu_data_acquire_on_node_cb_sequential_consistency(
            job->h[i], STARPU_ACQUIRE_NO_NODE, STARPU_R, nl_hint_fire, job, 1);
    starpu_data_acquire_on_node_cb_sequential_consistency(
        trigger, STARPU_ACQUIRE_NO_NODE, STARPU_R, nl_hint_trigger_done, job, 1);
    nl_hint_fire(job);
    return 0;
}
