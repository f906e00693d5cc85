/* The memory guard's hook into task submission (kernels/guard.c): 0, or -ENOMEM
 * when the task's working set cannot move between RAM and the disk node. */
#ifndef NL_GUARD_H
#define NL_GUARD_H
#include <starpu.h>
int nl_guard_admit(struct starpu_task *task, int op_id);
#endif
