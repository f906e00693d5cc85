#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- waits that Python can interrupt --------------------------------------
 * Python runs its signal handlers (KeyboardInterrupt) only between calls into
 * C, so every blocking wait here takes a timeout and Python loops on it: a
 * Ctrl-C lands between two short waits, never inside StarPU.
 *
 * nl_wait_all: one helper thread sits in starpu_task_wait_for_all and signals
 * a condition when it returns; a caller waits on that condition for at most
 * timeout_ms. A waiter left running by an interrupted wait serves the next
 * wait too; its return counts only if no task was submitted meanwhile. */
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cond = PTHREAD_COND_INITIALIZER;
static int waiter_running;

static void *wait_all_thread(void *arg)
{
    (void)arg;
    starpu_task_wait_for_all();
    pthread_mutex_lock(&wait_lock);
    waiter_running = 0;
    pthread_cond_broadcast(&wait_cond);
    pthread_mutex_unlock(&wait_lock);
    return NULL;
}

static struct timespec deadline_after(int timeout_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
    return t;
}

/* 1 once every submitted task is done, 0 on timeout, negative errno on error. */
int nl_wait_all(int timeout_ms)
{
    struct timespec until = deadline_after(timeout_ms);
    pthread_mutex_lock(&wait_lock);
    for (;;) {
        if (!waiter_running) {
            if (starpu_task_nsubmitted() == 0) break;
            pthread_t t;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            int ret = pthread_create(&t, &attr, wait_all_thread, NULL);
            pthread_attr_destroy(&attr);
            if (ret) { pthread_mutex_unlock(&wait_lock); return -ret; }
            waiter_running = 1;
        }
        if (pthread_cond_timedwait(&wait_cond, &wait_lock, &until) == ETIMEDOUT
            && waiter_running) {
            pthread_mutex_unlock(&wait_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&wait_lock);
    /* every task is done, so every tile freed so far is released (StarPU runs an
     * unregister_submit's release when the tile's last task ends) */
    __atomic_store_n(&nl_freed_pending_bytes, 0, __ATOMIC_RELAXED);
    return 1;
}

/* nl_ready_*: wait, interruptibly, until tiles can be accessed in a mode (their
 * pending writers, and readers for a write, are done). Each tile is acquired
 * with a callback that releases it at once and counts it down. The group is
 * freed by the last of the caller (nl_ready_drop) and the callbacks, so an
 * interrupted caller may leave callbacks pending. */
struct nl_ready;
struct nl_ready_item { struct nl_ready *group; starpu_data_handle_t handle; };
struct nl_ready {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int64_t pending, refs;
    struct nl_ready_item items[];
};

static void ready_unref(struct nl_ready *g)
{
    pthread_mutex_lock(&g->lock);
    int64_t left = --g->refs;
    pthread_mutex_unlock(&g->lock);
    if (!left) {
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
        free(g);
    }
}

static void ready_callback(void *arg)
{
    struct nl_ready_item *it = arg;
    struct nl_ready *g = it->group;
    starpu_data_release_on_node(it->handle, STARPU_ACQUIRE_NO_NODE);
    pthread_mutex_lock(&g->lock);
    if (--g->pending == 0) pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    ready_unref(g);
}

struct nl_ready *nl_ready_start(int64_t n, starpu_data_handle_t *handles, int write)
{
    struct nl_ready *g = malloc(sizeof *g + (size_t)n * sizeof g->items[0]);
    if (!g) return NULL;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->pending = n;
    g->refs = n + 1;
    for (int64_t i = 0; i < n; i++) {
        g->items[i] = (struct nl_ready_item){g, handles[i]};
        if (starpu_data_acquire_on_node_cb(handles[i], STARPU_ACQUIRE_NO_NODE,
                                           write ? STARPU_W : STARPU_R, ready_callback,
                                           &g->items[i])) {
            /* not acquired: count it down here (cannot happen for live handles) */
            pthread_mutex_lock(&g->lock);
            g->pending--;
            g->refs--;
            pthread_mutex_unlock(&g->lock);
        }
    }
    return g;
}

/* 1 once every tile of the group was available, 0 on timeout. */
int nl_ready_wait(struct nl_ready *g, int timeout_ms)
{
    struct timespec until = deadline_after(timeout_ms);
    pthread_mutex_lock(&g->lock);
    while (g->pending && pthread_cond_timedwait(&g->cond, &g->lock, &until) != ETIMEDOUT) {}
    int done = g->pending == 0;
    pthread_mutex_unlock(&g->lock);
    return done;
}

void nl_ready_drop(struct nl_ready *g)
{
    if (g) ready_unref(g);
}

/* Copy one tile from (to_tile = 0) or to (1) a strided array, between its
 * acquire and release in one C call: an interrupt cannot leave the tile
 * acquired. The tile is C-contiguous of `shape`; `strides` (bytes) are the
 * array's. Returns starpu_data_acquire's code. */
int nl_tile_copy(starpu_data_handle_t handle, int to_tile, char *array, int ndim,
                 const int64_t *shape, const int64_t *strides, size_t elemsize)
{
    int ret = starpu_data_acquire(handle, to_tile ? STARPU_W : STARPU_R);
    if (ret) return ret;
    char *tile = starpu_data_get_local_ptr(handle);
    size_t row = (size_t)(ndim ? shape[ndim - 1] : 1) * elemsize;
    int64_t rows = 1, index[16] = {0};
    for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int d = 0; d < ndim - 1; d++) off += index[d] * strides[d];
        if (to_tile)
            memcpy(tile + (size_t)r * row, array + off, row);
        else
            memcpy(array + off, tile + (size_t)r * row, row);
        for (int d = ndim - 2; d >= 0 && ++index[d] == shape[d]; d--) index[d] = 0;
    }
    starpu_data_release(handle);
    return 0;
}
