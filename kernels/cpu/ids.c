#include "ids.h"
#include "core.h"

int nl_ids_in_range(const char *op, const char *what, int64_t n, int64_t vocab,
                    const int64_t *ids)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            nl_error("%s: %s %lld is outside the vocabulary of %lld tokens (valid %ss are "
                     "0..%lld)", op, what, (long long)ids[i], (long long)vocab, what,
                     (long long)vocab - 1);
            return 0;
        }
    return 1;
}
