/* Runtime glue: task scope, error channel, tile registration, task records.
 * One StarPU runtime exists per process (StarPU's own rule), so the state here
 * is per process; nl_reset() clears it when a Runtime starts. */
#define NL_WITH_STARPU
#include "core.h"
#include "api.h"
#include "guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
 * nl_submit_task fills a record with what is known at submission (op, scope,
 * flops, the handles and their access modes, their bytes) while the handles
 * are surely alive; a C callback adds the profiling times when the task ends
 * and moves the record into a growable array that Python drains. No Python
 * code runs per task. Records are taken only while a Trace is active. */
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nl_task_record *records;
static int64_t nrecords, records_cap;
static int tracing;
static int64_t next_task_id;   /* submission order, for the dependency graph */

static double us(struct timespec t) { return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }

/* Room for element n of a growable array (under its lock); 0 if out of memory. */
static int grow(void **array, int64_t *cap, int64_t n, size_t size)
{
    if (n < *cap) return 1;
    int64_t c = *cap ? 2 * *cap : 4096;
    void *grown = realloc(*array, (size_t)c * size);
    if (!grown) return 0;
    *array = grown;
    *cap = c;
    return 1;
}

static void record_task(void *arg)
{
    struct nl_task_record *r = arg;
    struct starpu_task *task = starpu_task_get_current();
    struct starpu_profiling_task_info *p = task ? task->profiling_info : NULL;
    if (p) {  /* NULL when profiling was off as the task was submitted */
        r->worker = p->workerid;
        r->submit_us = us(p->submit_time);
        r->ready_us = us(p->push_start_time);
        r->acquire_us = us(p->acquire_data_end_time);
        r->start_us = us(p->start_time);
        r->end_us = us(p->end_time);
        pthread_mutex_lock(&trace_lock);
        if (grow((void **)&records, &records_cap, nrecords, sizeof *records))
            records[nrecords++] = *r;
        else
            nl_error("trace: out of memory for task records");
        pthread_mutex_unlock(&trace_lock);
    }
    free(r);
}

static struct nl_task_record *new_record(struct starpu_task *task, int op_id)
{
    struct nl_task_record *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->task_id = __atomic_fetch_add(&next_task_id, 1, __ATOMIC_RELAXED);
    r->op = op_id;
    r->phase = scope.phase;
    r->layer = scope.layer;
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

void nl_trace_enable(int on) { tracing = on; }

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

int nl_submit_task(struct starpu_task *task, int op_id)
{
    if (too_big(task, op_id)) {
        discard(task);
        return -E2BIG;
    }
    int refused = nl_guard_admit(task, op_id);   /* kernels/guard.c */
    if (refused) {
        discard(task);
        return refused;
    }
    task->priority = scope.priority;
    struct nl_task_record *r = NULL;
    if (tracing && (r = new_record(task, op_id))) {
        task->callback_func = record_task;
        task->callback_arg = r;
    }
    int ret = starpu_task_submit(task);
    if (ret) {
        free(r);
        discard(task);
    }
    return ret;
}

/* ---- worker and bus counters (both reset when read) --------------------- */
int nl_worker_stats(int worker, struct nl_worker_stats *out)
{
    struct starpu_profiling_worker_info info;
    int ret = starpu_profiling_worker_get_info(worker, &info);
    if (ret || !out) return ret;
    out->total_us = us(info.total_time);
    out->executing_us = us(info.executing_time);
    out->sleeping_us = us(info.sleeping_time);
    out->flops = info.flops;
    out->tasks = info.executed_tasks;
    return 0;
}

int nl_bus_stats(int bus, struct nl_bus_stats *out)
{
    struct starpu_profiling_bus_info info;
    int ret = starpu_bus_get_profiling_info(bus, &info);
    if (ret || !out) return ret;
    out->src = starpu_bus_get_src(bus);
    out->dst = starpu_bus_get_dst(bus);
    out->bytes = info.transferred_bytes;
    out->count = info.transfer_count;
    out->total_us = us(info.total_time);
    return 0;
}

/* ---- memory sampler ---------------------------------------------------------
 * A thread polls every memory node's StarPU accounting (total - available:
 * what StarPU allocated there) and, as node -1, the bytes of tiles registered
 * and not yet unregistered (a fallback where a node has no accounting, i.e.
 * starpu_memory_get_total returns -1). Times share the tasks' clock. */
static int64_t registered_bytes;
/* Bytes of tiles freed asynchronously since every task was last seen done: StarPU
 * releases them only after their tasks, so they still take memory. The memory
 * guard of Runtime counts them (a loop of create/free must not queue more tiles
 * than the memory limit holds: StarPU would spin forever) and waits for the
 * tasks when they matter. (Counting exactly, with an acquire callback per tile
 * before starpu_data_unregister_submit, delayed the release: RSS grew by 100+ MB
 * in the create/free stress test of tests/test_runtime.py.) */
static int64_t freed_pending_bytes;
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nl_mem_sample *samples;
static int64_t nsamples, samples_cap;
static pthread_t sampler;
static int sampling;
static long sample_period_ns;

static void push_sample(double t, int node, int64_t used)
{
    if (grow((void **)&samples, &samples_cap, nsamples, sizeof *samples))
        samples[nsamples++] = (struct nl_mem_sample){.t_us = t, .node = node, .used = used};
}

void nl_memory_sample(void)
{
    double t = starpu_timing_now();
    pthread_mutex_lock(&sample_lock);
    unsigned nodes = starpu_memory_nodes_get_count();
    for (unsigned node = 0; node < nodes; node++) {
        ssize_t total = starpu_memory_get_total(node);
        if (total >= 0) push_sample(t, (int)node, total - starpu_memory_get_available(node));
    }
    push_sample(t, -1, __atomic_load_n(&registered_bytes, __ATOMIC_RELAXED));
    pthread_mutex_unlock(&sample_lock);
}

static void *sample_loop(void *arg)
{
    (void)arg;
    struct timespec pause = {sample_period_ns / 1000000000L, sample_period_ns % 1000000000L};
    while (__atomic_load_n(&sampling, __ATOMIC_ACQUIRE)) {
        nl_memory_sample();
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int nl_sampler_start(double period_ms)
{
    if (sampling) return -EBUSY;
    sample_period_ns = (long)(period_ms * 1e6);
    if (sample_period_ns < 100000) sample_period_ns = 100000;
    sampling = 1;
    int ret = pthread_create(&sampler, NULL, sample_loop, NULL);
    if (ret) sampling = 0;
    return -ret;
}

void nl_sampler_stop(void)
{
    if (!sampling) return;
    __atomic_store_n(&sampling, 0, __ATOMIC_RELEASE);
    pthread_join(sampler, NULL);
    nl_memory_sample();   /* the state at the end */
}

/* Copy up to max samples into out; keep = 0 also removes them. */
int64_t nl_samples_drain(struct nl_mem_sample *out, int64_t max, int keep)
{
    pthread_mutex_lock(&sample_lock);
    int64_t n = nsamples < max ? nsamples : max;
    memcpy(out, samples, (size_t)n * sizeof *samples);
    if (!keep) {
        memmove(samples, samples + n, (size_t)(nsamples - n) * sizeof *samples);
        nsamples -= n;
    }
    pthread_mutex_unlock(&sample_lock);
    return n;
}

int64_t nl_samples_count(void)
{
    pthread_mutex_lock(&sample_lock);
    int64_t n = nsamples;
    pthread_mutex_unlock(&sample_lock);
    return n;
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
    /* StarPU's own SIGINT/SIGSEGV handlers re-raise the signal after shutting
     * down the first runtime, which makes SIGINT hang any later runtime in the
     * process: Python's handler must stay the only one (Jupyter's interrupt). */
    conf.catch_signals = 0;
    int ret = starpu_init(&conf);
    if (ret) return ret;
    nl_set_scope(0, -1, 0);
    char stale[8];
    nl_take_error(stale, sizeof stale);
    nl_trace_clear();
    tracing = 0;
    __atomic_store_n(&registered_bytes, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&freed_pending_bytes, 0, __ATOMIC_RELAXED);
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
        __atomic_add_fetch(&registered_bytes, nelems[i] * (int64_t)elemsize, __ATOMIC_RELAXED);
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
            int64_t bytes = (int64_t)starpu_data_get_size(handles[i]);
            __atomic_sub_fetch(&registered_bytes, bytes, __ATOMIC_RELAXED);
            if (sync) {
                starpu_data_unregister(handles[i]);
            } else {
                __atomic_add_fetch(&freed_pending_bytes, bytes, __ATOMIC_RELAXED);
                starpu_data_unregister_submit(handles[i]);
            }
            handles[i] = NULL;
        }
}

/* ---- tile handle blocks -------------------------------------------------------
 * A tensor's handles live in a block allocated here and freed by a C function
 * that cffi calls when the Python array object is collected (ffi.gc): no Python
 * code runs there, so a Ctrl-C cannot cut a free in half or be swallowed by a
 * __del__. Live blocks form a ring, so that stopping a runtime unregisters every
 * tile still registered. A non-NULL handle in a block is always a live one. */
struct nl_tiles { struct nl_tiles *prev, *next; int64_t n; starpu_data_handle_t h[]; };
static struct nl_tiles live_tiles = {&live_tiles, &live_tiles, 0};
static pthread_mutex_t tiles_lock = PTHREAD_MUTEX_INITIALIZER;

static struct nl_tiles *block_of(starpu_data_handle_t *h)
{
    return (struct nl_tiles *)((char *)h - offsetof(struct nl_tiles, h));
}

starpu_data_handle_t *nl_tiles_new(int64_t n)
{
    struct nl_tiles *b = calloc(1, sizeof *b + (size_t)n * sizeof b->h[0]);
    if (!b) return NULL;
    b->n = n;
    pthread_mutex_lock(&tiles_lock);
    b->prev = live_tiles.prev;
    b->next = &live_tiles;
    live_tiles.prev->next = b;
    live_tiles.prev = b;
    pthread_mutex_unlock(&tiles_lock);
    return b->h;
}

/* The destructor: unregister what is still registered (once its tasks are done). */
void nl_tiles_release(starpu_data_handle_t *h)
{
    struct nl_tiles *b = block_of(h);
    pthread_mutex_lock(&tiles_lock);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    pthread_mutex_unlock(&tiles_lock);
    if (starpu_is_initialized()) nl_unregister_tiles(b->n, b->h, 0);
    free(b);
}

/* Runtime shutdown: unregister every tile still registered, now. Returns how
 * many blocks had tiles registered. */
int64_t nl_tiles_unregister_all(void)
{
    int64_t count = 0;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next) {
        int any = 0;
        for (int64_t i = 0; i < b->n; i++) any |= b->h[i] != NULL;
        count += any;
        nl_unregister_tiles(b->n, b->h, 1);
    }
    pthread_mutex_unlock(&tiles_lock);
    return count;
}

/* How many tensors have tiles registered now. */
int64_t nl_tiles_live(void)
{
    int64_t count = 0;
    pthread_mutex_lock(&tiles_lock);
    for (struct nl_tiles *b = live_tiles.next; b != &live_tiles; b = b->next)
        for (int64_t i = 0; i < b->n; i++)
            if (b->h[i]) { count++; break; }
    pthread_mutex_unlock(&tiles_lock);
    return count;
}

/* Bytes of the tiles registered, plus those freed while tasks were pending. */
int64_t nl_held_bytes(void)
{
    return __atomic_load_n(&registered_bytes, __ATOMIC_RELAXED)
           + __atomic_load_n(&freed_pending_bytes, __ATOMIC_RELAXED);
}

/* Bytes of the tiles registered now (freed ones not counted): the memory guard's
 * admission uses it, as it cannot wait for pending frees at submission. */
int64_t nl_live_bytes(void)
{
    return __atomic_load_n(&registered_bytes, __ATOMIC_RELAXED);
}

/* A disk memory node for out-of-core runs: StarPU evicts tiles there when the
 * RAM limit is reached. Returns the node id, or a negative errno. */
int nl_disk_register(const char *dir, int64_t bytes)
{
    return starpu_disk_register(&starpu_disk_unistd_ops, (void *)dir, bytes);
}

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
    __atomic_store_n(&freed_pending_bytes, 0, __ATOMIC_RELAXED);
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

/* ---- out-of-core disk node with byte counters --------------------------------
 * The disk node's backend is StarPU's unistd one, with O_DIRECT (evicted tiles
 * bypass the page cache, so what fits under the cap really fits) or without.
 * Every backend call goes through the wrappers below, which count the bytes
 * moved each way: the disk node's own statistics, independent of profiling.
 *
 * O_DIRECT needs page-aligned buffers and sizes (StarPU asserts both). Tiles
 * of any size are allowed here: disk objects are allocated rounded up to whole
 * pages, and a transfer whose size or buffer is not aligned goes through an
 * aligned bounce buffer (synchronously: its asynchronous form returns NULL,
 * which makes StarPU fall back to the synchronous call). */
#include <unistd.h>

static struct starpu_disk_ops *disk_inner;
static struct starpu_disk_ops disk_counted;
static int disk_direct;
static int64_t disk_bytes_read, disk_bytes_written, disk_reads, disk_writes;

static size_t page_size(void) { return (size_t)getpagesize(); }
static size_t page_round(size_t n) { size_t p = page_size(); return (n + p - 1) / p * p; }
static int page_aligned(const void *buf, off_t offset, size_t size)
{
    size_t p = page_size();
    return (uintptr_t)buf % p == 0 && (size_t)offset % p == 0 && size % p == 0;
}

static void count(int64_t *bytes, int64_t *ops, size_t size)
{
    __atomic_add_fetch(bytes, (int64_t)size, __ATOMIC_RELAXED);
    __atomic_add_fetch(ops, 1, __ATOMIC_RELAXED);
}

static void *disk_alloc(void *base, size_t size)
{
    return disk_inner->alloc(base, disk_direct ? page_round(size) : size);
}

static void disk_free(void *base, void *obj, size_t size)
{
    disk_inner->free(base, obj, disk_direct ? page_round(size) : size);
}

/* The pages covering [offset, offset + size) of obj, in an aligned buffer. */
static void *bounce_read(void *base, void *obj, off_t offset, size_t size, off_t *lo)
{
    size_t p = page_size();
    *lo = offset / (off_t)p * (off_t)p;
    size_t len = page_round((size_t)(offset - *lo) + size);
    void *tmp = NULL;
    if (posix_memalign(&tmp, p, len)) return NULL;
    disk_inner->read(base, obj, tmp, *lo, len);
    return tmp;
}

static int disk_read(void *base, void *obj, void *buf, off_t offset, size_t size)
{
    count(&disk_bytes_read, &disk_reads, size);
    if (!disk_direct || page_aligned(buf, offset, size))
        return disk_inner->read(base, obj, buf, offset, size);
    off_t lo;
    void *tmp = bounce_read(base, obj, offset, size, &lo);
    if (!tmp) return -ENOMEM;
    memcpy(buf, (char *)tmp + (offset - lo), size);
    free(tmp);
    return 0;
}

static int disk_write(void *base, void *obj, const void *buf, off_t offset, size_t size)
{
    count(&disk_bytes_written, &disk_writes, size);
    if (!disk_direct || page_aligned(buf, offset, size))
        return disk_inner->write(base, obj, buf, offset, size);
    off_t lo;
    size_t p = page_size(), len = page_round((size_t)(offset % (off_t)p) + size);
    void *tmp = NULL;
    if (offset % (off_t)p == 0) {   /* a whole object from its start: the padding is don't-care */
        lo = offset;
        if (posix_memalign(&tmp, p, len)) return -ENOMEM;
        memset((char *)tmp + size, 0, len - size);
    } else if (!(tmp = bounce_read(base, obj, offset, size, &lo))) {  /* read-modify-write */
        return -ENOMEM;
    }
    memcpy((char *)tmp + (offset - lo), buf, size);
    int ret = disk_inner->write(base, obj, tmp, lo, len);
    free(tmp);
    return ret;
}

static void *disk_async_read(void *base, void *obj, void *buf, off_t offset, size_t size)
{
    if (disk_direct && !page_aligned(buf, offset, size)) return NULL;  /* → disk_read */
    void *ev = disk_inner->async_read(base, obj, buf, offset, size);
    if (ev) count(&disk_bytes_read, &disk_reads, size);
    return ev;
}

static void *disk_async_write(void *base, void *obj, void *buf, off_t offset, size_t size)
{
    if (disk_direct && !page_aligned(buf, offset, size)) return NULL;  /* → disk_write */
    void *ev = disk_inner->async_write(base, obj, buf, offset, size);
    if (ev) count(&disk_bytes_written, &disk_writes, size);
    return ev;
}

static int disk_full_read(void *base, void *obj, void **ptr, size_t *size, unsigned node)
{
    int ret = disk_inner->full_read(base, obj, ptr, size, node);
    count(&disk_bytes_read, &disk_reads, *size);
    return ret;
}

static int disk_full_write(void *base, void *obj, void *ptr, size_t size)
{
    count(&disk_bytes_written, &disk_writes, size);
    return disk_inner->full_write(base, obj, ptr, size);
}

int nl_disk_register_backend(const char *dir, int64_t bytes, int o_direct)
{
    disk_inner = o_direct ? &starpu_disk_unistd_o_direct_ops : &starpu_disk_unistd_ops;
    disk_direct = o_direct;
    disk_counted = *disk_inner;
    disk_counted.alloc = disk_alloc;
    disk_counted.free = disk_free;
    disk_counted.read = disk_read;
    disk_counted.write = disk_write;
    disk_counted.async_read = disk_inner->async_read ? disk_async_read : NULL;
    disk_counted.async_write = disk_inner->async_write ? disk_async_write : NULL;
    disk_counted.full_read = disk_inner->full_read ? disk_full_read : NULL;
    disk_counted.full_write = disk_inner->full_write ? disk_full_write : NULL;
    disk_counted.async_full_read = NULL;   /* StarPU falls back to full_read */
    disk_counted.async_full_write = NULL;
    disk_counted.copy = NULL;
    int node = starpu_disk_register(&disk_counted, (void *)dir, bytes);
    nl_disk_counters(NULL, 1);   /* the bandwidth calibration is not the run's traffic */
    return node;
}

/* out[4] = bytes read from disk, bytes written to it, read calls, write calls;
 * reset = 1 zeroes them after reading (out may be NULL). */
void nl_disk_counters(int64_t *out, int reset)
{
    int64_t *c[4] = {&disk_bytes_read, &disk_bytes_written, &disk_reads, &disk_writes};
    for (int i = 0; i < 4; i++) {
        int64_t v = reset ? __atomic_exchange_n(c[i], 0, __ATOMIC_RELAXED)
                          : __atomic_load_n(c[i], __ATOMIC_RELAXED);
        if (out) out[i] = v;
    }
}

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

/* ---- tile buffers kept for reuse ----------------------------------------------------
 * StarPU frees a tile's RAM buffer when the tile is unregistered, and a model frees its
 * temporaries every step. glibc returns a block above its mmap threshold (at most 32 MiB)
 * to the system at once, so the next step's tile of the same size arrives as fresh pages
 * that fault on first touch inside a kernel: at n_embd 1024 the 32 MiB logits-gradient
 * tiles took 230 ms per step in cross_entropy_backward against 60 ms on warm pages. In
 * memory, the runtime routes StarPU's RAM allocations through these hooks: a freed buffer
 * of at least CACHE_MIN bytes is kept, by size, and handed to the next allocation of that
 * size; beyond `cache_cap` bytes kept, buffers are freed. Out of core the cache is off
 * (the process must stay under its cap). StarPU counts its memory before calling a hook,
 * so its accounting is unchanged; buffers are 64-byte aligned (page-aligned from
 * CACHE_MIN up). */
#define CACHE_MIN ((size_t)256 << 10)
#define CACHE_CLASSES 64
static struct { size_t size; void *head; } cache[CACHE_CLASSES];
static size_t cache_kept, cache_cap;
static int64_t cache_hits, cache_misses;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int cache_malloc(unsigned node, void **a, size_t size, int flags)
{
    (void)node; (void)flags;
    if (size >= CACHE_MIN) {
        pthread_mutex_lock(&cache_lock);
        for (int i = 0; i < CACHE_CLASSES; i++)
            if (cache[i].size == size && cache[i].head) {
                *a = cache[i].head;
                cache[i].head = *(void **)*a;   /* the list's link lives in the free buffer */
                cache_kept -= size;
                cache_hits++;
                pthread_mutex_unlock(&cache_lock);
                return 0;
            }
        cache_misses++;
        pthread_mutex_unlock(&cache_lock);
    }
    if (posix_memalign(a, size >= CACHE_MIN ? 4096 : 64, size ? size : 1)) {
        *a = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int cache_free(unsigned node, void *a, size_t size, int flags)
{
    (void)node; (void)flags;
    if (a && size >= CACHE_MIN) {   /* starpu_free() passes size 0: freed below */
        pthread_mutex_lock(&cache_lock);
        int slot = -1;   /* the class of this size, else an empty one; none when full */
        for (int i = 0; i < CACHE_CLASSES && cache_kept + size <= cache_cap; i++) {
            if (cache[i].size == size) { slot = i; break; }
            if (slot < 0 && !cache[i].head) slot = i;
        }
        if (slot >= 0) {
            cache[slot].size = size;
            *(void **)a = cache[slot].head;
            cache[slot].head = a;
            cache_kept += size;
            pthread_mutex_unlock(&cache_lock);
            return 0;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    free(a);
    return 0;
}

/* Free every kept buffer and zero the counters. */
static void cache_flush(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < CACHE_CLASSES; i++) {
        while (cache[i].head) {
            void *next = *(void **)cache[i].head;
            free(cache[i].head);
            cache[i].head = next;
        }
        cache[i].size = 0;
    }
    cache_kept = 0;
    cache_hits = cache_misses = 0;
    pthread_mutex_unlock(&cache_lock);
}

/* cap > 0: keep up to cap bytes of freed buffers (call before starpu_init); cap = 0:
 * free them all and give StarPU back its own allocator (call after starpu_shutdown).
 * A buffer from either allocator may be freed by the other: both are malloc'd. */
void nl_buffer_cache(int64_t cap)
{
    if (cap > 0) {
        cache_flush();
        cache_cap = (size_t)cap;
        starpu_malloc_set_hooks(cache_malloc, cache_free);
    } else {
        starpu_malloc_set_hooks(NULL, NULL);
        cache_cap = 0;
        cache_flush();
    }
}

/* out: hits, misses (allocations of ≥ CACHE_MIN bytes), bytes kept now. */
void nl_buffer_cache_stats(int64_t *out)
{
    pthread_mutex_lock(&cache_lock);
    out[0] = cache_hits;
    out[1] = cache_misses;
    out[2] = (int64_t)cache_kept;
    pthread_mutex_unlock(&cache_lock);
}

/* ---- honest RSS under a cap ------------------------------------------------------
 * glibc raises its mmap threshold each time a large block is freed, after which tile
 * buffers come from heap arenas that keep freed memory: measured, a process capped at
 * 66 MiB of tiles grew to 287 MiB of RSS. A fixed threshold makes every buffer larger
 * than it an mmap, returned to the system when freed (216 MiB, flat). */
#include <malloc.h>

int nl_malloc_fixed_threshold(int bytes)
{
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
