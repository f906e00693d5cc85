/* Embedding lookup and its backward on one (token tile, vocabulary tile) pair, as
 * kernels/cpu/embedding.c: the table tile holds vocabulary rows [voff, voff + vrows),
 * e columns; ids outside them are skipped (the host function checks the range first:
 * kernels/opencl/model_ops.c). */

/* out[i, j] = table[ids[i] − voff, j]: one work item per (token, column) */
__kernel void nl_embedding(long n, long e, long voff, long vrows, __global const long *ids,
                           __global const float *table, __global float *out)
{
    long id = get_global_id(0);
    if (id >= n * e) return;
    long i = id / e, j = id % e, r = ids[i] - voff;
    if (r >= 0 && r < vrows) out[id] = table[r * e + j];
}

/* dtable[ids[i] − voff, j] += dout[i, j]: one work item per column j, going through the
 * tokens in order. A repeated id adds to the same row again within one work item, so no
 * update is lost and no atomics are needed; the additions come in the CPU kernel's order,
 * so the sums are bit for bit the CPU's. */
__kernel void nl_embedding_backward(long n, long e, long voff, long vrows,
                                    __global const long *ids, __global const float *dout,
                                    __global float *dtable)
{
    long j = get_global_id(0);
    if (j >= e) return;
    for (long i = 0; i < n; i++) {
        long r = ids[i] - voff;
        if (r >= 0 && r < vrows) dtable[r * e + j] += dout[i * e + j];
    }
}
