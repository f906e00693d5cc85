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
#ifdef NL_HAVE_MPI
/* kernels/mpi.c: set while StarPU-MPI runs; the generated submit helpers then
 * build their tasks with starpu_mpi_task_build on nl_mpi_comm */
#include <starpu_mpi.h>
extern int nl_mpi_active;
extern MPI_Comm nl_mpi_comm;
#endif
#endif

void nl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
