/* Embedding lookup and its backward, on one (token tile, vocabulary tile) pair.
 * The table tile holds vocabulary rows [voff, voff + vrows) and e columns; a
 * token tile holds n ids, its output tile n rows of e values (C order).
 *   forward:  out[i, :]   = table[ids[i] − voff, :]   for ids[i] in the tile's rows
 *   backward: dtable[ids[i] − voff, :] += dout[i, :]  likewise
 * Ids outside the tile's rows are skipped, so a bad id can never index memory;
 * the one task per token tile with `check` set reports ids outside [0, vocab). */
#include "prototypes.h"
#include <string.h>
#include "core.h"
#include "ids.h"

void nl_embedding(int64_t n, int64_t e, int64_t voff, int64_t vrows, int64_t vocab,
                  int32_t check, const int64_t *ids, const float *table, float *out)
{
    if (check && !nl_ids_in_range("embedding", "token id", n, vocab, ids)) return;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = ids[i] - voff;
        if (r >= 0 && r < vrows)
            memcpy(out + i * e, table + r * e, (size_t)e * sizeof *out);
    }
}

void nl_embedding_backward(int64_t n, int64_t e, int64_t voff, int64_t vrows, int64_t vocab,
                           int32_t check, const int64_t *ids, const float *dout,
                           float *dtable)
{
    if (check && !nl_ids_in_range("embedding_backward", "token id", n, vocab, ids)) return;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = ids[i] - voff;
        if (r < 0 || r >= vrows) continue;
        float *row = dtable + r * e;
        const float *d = dout + i * e;
        for (int64_t j = 0; j < e; j++) row[j] += d[j];
    }
}
