#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* ---- tile buffers kept for reuse ----------------------------------------------------
 * StarPU frees a tile's RAM buffer when the tile is unregistered, and a model frees its
 * temporaries every step. glibc returns a block above its mmap threshold (at most 32 MiB)
 * to the system at once, so the next step's tile of the same size arrives as fresh pages
 * that fault on first touch inside a kernel, which then runs several times slower than on
 * warm pages (BENCHMARKS.md, "Measurements formerly in code comments"). In memory, the runtime routes StarPU's RAM allocations through these hooks: a freed buffer
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
