#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A disk memory node for out-of-core runs: StarPU evicts tiles there when the
 * RAM limit is reached. Returns the node id, or a negative errno. */
int nl_disk_register(const char *dir, int64_t bytes)
{
    return starpu_disk_register(&starpu_disk_unistd_ops, (void *)dir, bytes);
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
