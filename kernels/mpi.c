/* StarPU-MPI glue: MPI start/stop, tile ownership, gathering and flushing.
 *
 * Every rank registers every tile and submits the same task flow; a tile's
 * owner holds its value, a task runs on the owner of the data it writes, and
 * StarPU-MPI moves the tiles it reads (the generated nl_submit_* helpers take
 * the starpu_mpi_task_build / post_build path while nl_mpi_active is set).
 * Built without MPI headers (no libopenmpi-dev), every call reports -ENOSYS. */
#define NL_WITH_STARPU
#include "core.h"
#include "api.h"

#include <errno.h>
#include <stdlib.h>

#ifdef NL_HAVE_MPI
#include <mpi.h>
#include <starpu_mpi.h>

int nl_mpi_active;
MPI_Comm nl_mpi_comm;

static void finalize_at_exit(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

int nl_mpi_available(void) { return 1; }

/* MPI (thread level SERIALIZED: StarPU-MPI's progress thread makes the calls),
 * then StarPU-MPI on a running StarPU. MPI stays up until the process exits:
 * it cannot be initialised twice, and a Runtime can be started again. */
int nl_mpi_init(int *rank, int *size)
{
    int up = 0;
    MPI_Initialized(&up);
    if (!up) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return -EIO;
        atexit(finalize_at_exit);
    }
    nl_mpi_comm = MPI_COMM_WORLD;
    int ret = starpu_mpi_init_comm(NULL, NULL, 0, nl_mpi_comm);
    if (ret) return ret;
    starpu_mpi_comm_rank(nl_mpi_comm, rank);
    starpu_mpi_comm_size(nl_mpi_comm, size);
    nl_mpi_active = 1;
    return 0;
}

int nl_mpi_shutdown(void)
{
    if (!nl_mpi_active) return 0;
    nl_mpi_active = 0;
    return starpu_mpi_shutdown();
}

void nl_mpi_register_tiles(int64_t n, starpu_data_handle_t *handles, const int *owners,
                           int64_t first_tag)
{
    for (int64_t i = 0; i < n; i++)
        starpu_mpi_data_register_comm(handles[i], first_tag + i, owners[i], nl_mpi_comm);
}

/* Every rank gets a copy of each tile (sent by its owner); nl_mpi_flush drops
 * the copies again on the ranks that do not own them. */
void nl_mpi_get_all(int64_t n, starpu_data_handle_t *handles)
{
    for (int64_t i = 0; i < n; i++)
        starpu_mpi_get_data_on_all_nodes_detached(nl_mpi_comm, handles[i]);
}

void nl_mpi_flush(int64_t n, starpu_data_handle_t *handles)
{
    for (int64_t i = 0; i < n; i++)
        starpu_mpi_cache_flush(nl_mpi_comm, handles[i]);
}

/* Wait for every task and transfer, then drop every copy received from another
 * rank: after a step the next one needs fresh values anyway, and a rank's memory
 * then holds its own tiles plus what one step brings in, not a copy of it all. */
int nl_mpi_wait_for_all(void)
{
    int ret = starpu_mpi_wait_for_all(nl_mpi_comm);
    if (ret) return ret;
    starpu_mpi_cache_flush_all_data(nl_mpi_comm);
    return starpu_mpi_wait_for_all(nl_mpi_comm);
}
int nl_mpi_barrier(void) { return starpu_mpi_barrier(nl_mpi_comm); }
void nl_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

#else

int nl_mpi_available(void) { return 0; }
int nl_mpi_init(int *rank, int *size) { (void)rank; (void)size; return -ENOSYS; }
int nl_mpi_shutdown(void) { return 0; }
void nl_mpi_register_tiles(int64_t n, starpu_data_handle_t *handles, const int *owners,
                           int64_t first_tag)
{ (void)n; (void)handles; (void)owners; (void)first_tag; }
void nl_mpi_get_all(int64_t n, starpu_data_handle_t *handles) { (void)n; (void)handles; }
void nl_mpi_flush(int64_t n, starpu_data_handle_t *handles) { (void)n; (void)handles; }
int nl_mpi_wait_for_all(void) { return -ENOSYS; }
int nl_mpi_barrier(void) { return -ENOSYS; }
void nl_mpi_abort(int code) { exit(code); }

#endif
