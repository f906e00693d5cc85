/* Host function of cross-entropy's stats on the OpenCL worker: the labels' range check on
 * the host (nl_ocl_ids_in_range, launch.c), then the kernel of loss.cl. */
#include "launch.h"

/* the tile at voff = 0 checks the labels, as on the CPU */
void nl_ocl_cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, int64_t vocab,
                                cl_mem x, cl_mem labels, cl_mem stats)
{
    if (voff == 0 && !nl_ocl_ids_in_range("cross_entropy", "label", n, vocab, labels)) return;
    ARGS(&n, &vt, &voff, &x, &labels, &stats);
    SIZES(8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    nl_ocl_launch("nl_cross_entropy_stats", n, NARGS, sizes, values);
}
