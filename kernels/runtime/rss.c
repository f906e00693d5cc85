#include "internal.h"

#include <malloc.h>

/* ---- honest RSS under a cap ------------------------------------------------------
 * glibc raises its mmap threshold each time a large block is freed, after which tile
 * buffers come from heap arenas that keep freed memory: measured, a process capped at
 * 66 MiB of tiles grew to 287 MiB of RSS. A fixed threshold makes every buffer larger
 * than it an mmap, returned to the system when freed (216 MiB, flat). */

int nl_malloc_fixed_threshold(int bytes)
{
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
