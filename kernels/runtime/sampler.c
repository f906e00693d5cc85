#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

/* ---- memory sampler ---------------------------------------------------------
 * A thread polls every memory node's StarPU accounting (total - available:
 * what StarPU allocated there) and, as node -1, the bytes of tiles registered
 * and not yet unregistered (a fallback where a node has no accounting, i.e.
 * starpu_memory_get_total returns -1). Times share the tasks' clock. */
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nl_mem_sample *samples;
static int64_t nsamples, samples_cap;
static pthread_t sampler;
static int sampling;
static long sample_period_ns;

static void push_sample(double t, int node, int64_t used)
{
    if (nl_grow((void **)&samples, &samples_cap, nsamples, sizeof *samples))
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
    push_sample(t, -1, __atomic_load_n(&nl_registered_bytes, __ATOMIC_RELAXED));
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
