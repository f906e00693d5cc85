/* Embedding lookup and its backward on one (token tile, vocabulary tile) pair, as
 * kernels/cpu/embedding.c: the table tile holds vocabulary rows [voff, voff + vrows), e
 * columns; ids outside them are skipped; with `check`, ids outside [0, vocab) are an error.
 *   forward:  out[i, :]   = table[ids[i] − voff, :]
 *   backward: dtable[ids[i] − voff, :] += dout[i, :] */
#include "common.cuh"

/* one thread per output value (i, c) */
__global__ static void embedding(int64_t n, int64_t e, int64_t voff, int64_t vrows,
                                 const int64_t *ids, const float *table, float *out)
{
    NL_CU_FOR(id, n * e) {
        int64_t r = ids[id / e] - voff;
        if (r >= 0 && r < vrows) out[id] = table[r * e + id % e];
    }
}

const char *nl_cu_embedding(cudaStream_t stream, int64_t n, int64_t e, int64_t voff,
                            int64_t vrows, int64_t vocab, int32_t check, const int64_t *ids,
                            const float *table, float *out)
{
    const char *err =
        check ? nl_cu_check_ids(stream, "embedding: token id", "token ids", n, vocab, ids) : NULL;
    if (err) return err;
    NL_CU_LAUNCH(embedding, n * e, stream, n, e, voff, vrows, ids, table, out);
}

/* one thread per column c, over the tokens in order: a row that several tokens share gets
 * their sum in the CPU kernel's order (no atomics: reproducible) */
__global__ static void embedding_backward(int64_t n, int64_t e, int64_t voff, int64_t vrows,
                                          const int64_t *ids, const float *dout,
                                          float *dtable)
{
    NL_CU_FOR(c, e)
        for (int64_t i = 0; i < n; i++) {
            int64_t r = ids[i] - voff;
            if (r >= 0 && r < vrows) dtable[r * e + c] += dout[i * e + c];
        }
}

const char *nl_cu_embedding_backward(cudaStream_t stream, int64_t n, int64_t e, int64_t voff,
                                     int64_t vrows, int64_t vocab, int32_t check,
                                     const int64_t *ids, const float *dout, float *dtable)
{
    const char *err = check ? nl_cu_check_ids(stream, "embedding_backward: token id", "token ids",
                                              n, vocab, ids)
                            : NULL;
    if (err) return err;
    NL_CU_LAUNCH(embedding_backward, e, stream, n, e, voff, vrows, ids, dout, dtable);
}
