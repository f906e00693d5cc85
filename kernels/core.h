/* Runtime glue shared by the generated codelets and the C kernels.
 *
 * Kernels never abort: a kernel that meets bad data (a token id outside the
 * vocabulary, say) calls nl_error() and returns; Python raises it as an
 * exception at the next Runtime.wait(). */
#pragma once
#include <stdint.h>
#include <stddef.h>

#ifdef NL_WITH_STARPU
#include <starpu.h>
/* Set on every task: the priority and the layer / phase tags of the scope the
 * Python side is in (Runtime.scope), the op id for traces; then submit. */
int nl_submit_task(struct starpu_task *task, int op_id);
#endif

void nl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
