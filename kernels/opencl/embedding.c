/* Host functions of the embedding on the OpenCL worker: the ids' range check on the host
 * (nl_ocl_ids_in_range, launch.c), then the kernel of embedding.cl. */
#include "launch.h"

void nl_ocl_embedding(int64_t n, int64_t e, int64_t voff, int64_t vrows, int64_t vocab,
                      int32_t check, cl_mem ids, cl_mem table, cl_mem out)
{
    if (check && !nl_ocl_ids_in_range("embedding", "token id", n, vocab, ids)) return;
    ARGS(&n, &e, &voff, &vrows, &ids, &table, &out);
    SIZES(8, 8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    nl_ocl_launch("nl_embedding", n * e, NARGS, sizes, values);
}

void nl_ocl_embedding_backward(int64_t n, int64_t e, int64_t voff, int64_t vrows,
                               int64_t vocab, int32_t check, cl_mem ids, cl_mem dout,
                               cl_mem dtable)
{
    if (check && !nl_ocl_ids_in_range("embedding_backward", "token id", n, vocab, ids)) return;
    ARGS(&n, &e, &voff, &vrows, &ids, &dout, &dtable);
    SIZES(8, 8, 8, 8, sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem));
    /* one work item per column: see kernels/opencl/embedding.cl */
    nl_ocl_launch("nl_embedding_backward", e, NARGS, sizes, values);
}
