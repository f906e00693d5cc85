/* Host functions of the OpenCL ops that check token ids or labels before their kernel:
 * a kernel cannot report an error, so the ids tile is read back from the device (n int64
 * values: one token tile) and checked on the host with the CPU kernels' own check
 * (kernels/cpu/ids.c), which gives the same error wherever the task ran. Only the one
 * task per token tile with the check set pays for the read. */
#include "launch.h"

#include <stdlib.h>

#include "../cpu/ids.h"

/* 1 if ids (n values on the device) are all in [0, vocab); else 0, the error said */
static int ids_in_range(const char *op, const char *what, int64_t n, int64_t vocab, cl_mem ids)
{
    if (n <= 0) return 1;
    int64_t *host = malloc((size_t)n * sizeof *host);
    if (!host) {
        nl_error("%s on OpenCL: no memory to check %lld %ss", op, (long long)n, what);
        return 0;
    }
    cl_command_queue queue;
    starpu_opencl_get_current_queue(&queue);
    cl_int err = clEnqueueReadBuffer(queue, ids, CL_TRUE, 0, (size_t)n * sizeof *host, host,
                                     0, NULL, NULL);
    int ok = err == CL_SUCCESS && nl_ids_in_range(op, what, n, vocab, host);
    if (err != CL_SUCCESS)
        nl_error("%s on OpenCL: reading the %ss back failed: %s", op, what,
                 starpu_opencl_error_string(err));
    free(host);
    return ok;
}

#define ARGS(...) const void *const values[] = {__VA_ARGS__}
#define SIZES(...) const size_t sizes[] = {__VA_ARGS__}
#define NARGS (int)(sizeof values / sizeof *values)

void nl_ocl_embedding(int64_t n, int64_t e, int64_t voff, int64_t vrows, int64_t vocab,
                      int32_t check, cl_mem ids, cl_mem table, cl_mem out)
{
    if (check && !ids_in_range("embedding", "token id", n, vocab, ids)) return;
    ARGS(&n, &e, &voff, &vrows, &ids, &table, &out);
    SIZES(8, 8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    nl_ocl_launch("nl_embedding", n * e, NARGS, sizes, values);
}

void nl_ocl_embedding_backward(int64_t n, int64_t e, int64_t voff, int64_t vrows,
                               int64_t vocab, int32_t check, cl_mem ids, cl_mem dout,
                               cl_mem dtable)
{
    if (check && !ids_in_range("embedding_backward", "token id", n, vocab, ids)) return;
    ARGS(&n, &e, &voff, &vrows, &ids, &dout, &dtable);
    SIZES(8, 8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    /* one work item per column: see kernels/opencl/embedding.cl */
    nl_ocl_launch("nl_embedding_backward", e, NARGS, sizes, values);
}

/* the tile at voff = 0 checks the labels, as on the CPU */
void nl_ocl_cross_entropy_stats(int64_t n, int64_t vt, int64_t voff, int64_t vocab,
                                cl_mem x, cl_mem labels, cl_mem stats)
{
    if (voff == 0 && !ids_in_range("cross_entropy", "label", n, vocab, labels)) return;
    ARGS(&n, &vt, &voff, &x, &labels, &stats);
    SIZES(8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    nl_ocl_launch("nl_cross_entropy_stats", n, NARGS, sizes, values);
}
