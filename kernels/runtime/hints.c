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
 * fetched). A prefetch issued at submission time would fire at once, since a whole
 * step is submitted ahead of its execution; tied to a tile the previous stage
 * writes, it fires when that stage ends. StarPU's own wont_use issues its disk
 * prefetch from such a callback. The hinted tiles must stay registered until then
 * (the callers hint tiles that tasks submitted after the trigger still read). */
struct nl_hint_job { starpu_data_handle_t trigger; int kind; int64_t n; starpu_data_handle_t h[]; };

static void nl_hint_fire(void *arg)
{
    struct nl_hint_job *job = arg;
    for (int64_t i = 0; i < job->n; i++) {
        if (job->kind == 1)
            starpu_data_wont_use(job->h[i]);
        else
            starpu_data_prefetch_on_node(job->h[i], STARPU_MAIN_RAM, 1);
    }
    starpu_data_release_on_node(job->trigger, STARPU_ACQUIRE_NO_NODE);
    free(job);
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
    return starpu_data_acquire_on_node_cb_sequential_consistency(
        trigger, STARPU_ACQUIRE_NO_NODE, STARPU_R, nl_hint_fire, job, 1);
}
