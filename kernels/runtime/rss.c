#include "internal.h"

#include <malloc.h>

/* ---- honest RSS under a cap ------------------------------------------------------
 * glibc raises its mmap threshold each time a large block is freed, after which tile
 * buffers come from heap arenas that keep freed memory, and a capped process's RSS grows
 * far past its tiles. A fixed threshold makes every buffer larger than it an mmap,
 * returned to the system when freed, so RSS stays flat (BENCHMARKS.md, "Measurements
 * formerly in code comments"). */

int nl_malloc_fixed_threshold(int bytes)
{
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
