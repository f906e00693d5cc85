/* The range check of token ids and labels, shared by the CPU kernels and the OpenCL
 * worker's host functions (kernels/opencl/model_ops.c), so that a bad id gets the same
 * error wherever its task ran. */
#pragma once
#include <stdint.h>

/* 1 if every ids[i] is in [0, vocab); else nl_error naming the first bad one (as
 * "<op>: <what> <id> is outside ...") and 0 */
int nl_ids_in_range(const char *op, const char *what, int64_t n, int64_t vocab,
                    const int64_t *ids);
