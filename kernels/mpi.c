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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* StarPU-MPI counts the bytes each rank sends to each other rank (STARPU_COMM_STATS=1,
 * read at starpu_mpi_init) and prints its own warning at start and a table at shutdown on
 * stderr: the counts go to the run's records instead (nl_mpi_comm_bytes), so those lines
 * are dropped; every other line the call prints passes through. */
static int drop_line(const char *line)
{
    return strstr(line, "[starpu_comm_stats]") != NULL
           || strstr(line, "STARPU_COMM_STATS=1") != NULL
           || (line[0] == '\n' && line[1] == '\0');
}

typedef int (*nl_call_t)(void);

static int call_without_stats_lines(nl_call_t call)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    if (!tmp || saved < 0) {   /* nothing to capture into: let the lines through */
        if (tmp) fclose(tmp);
        if (saved >= 0) close(saved);
        return call();
    }
    dup2(fileno(tmp), 2);
    int ret = call();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    char line[4096];
    while (fgets(line, sizeof line, tmp))
        if (!drop_line(line)) fputs(line, stderr);
    fclose(tmp);
    fflush(stderr);
    return ret;
}

static int init_comm(void) { return starpu_mpi_init_comm(NULL, NULL, 0, nl_mpi_comm); }
static int shutdown_comm(void) { return starpu_mpi_shutdown(); }

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
    setenv("STARPU_COMM_STATS", "1", 0);   /* a counter per message: the bytes per pair */
    int ret = call_without_stats_lines(init_comm);
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
    return call_without_stats_lines(shutdown_comm);
}

/* Bytes this rank has sent to each rank since StarPU-MPI started (``out``: one per rank);
 * 0 where StarPU-MPI does not count (STARPU_COMM_STATS=0 in the environment). */
void nl_mpi_comm_bytes(int64_t *out)
{
    int size;
    starpu_mpi_comm_size(nl_mpi_comm, &size);
    size_t *amounts = calloc(size, sizeof *amounts);
    if (!amounts) return;
    starpu_mpi_comm_amounts_retrieve(amounts);
    for (int r = 0; r < size; r++) out[r] = (int64_t)amounts[r];
    free(amounts);
}

/* Rank 0 gets every rank's row of ``n`` int64 (``mine`` on each rank; ``all``: size × n on
 * rank 0, untouched elsewhere). MPI itself belongs to StarPU-MPI's progress thread (thread
 * level SERIALIZED), so the rows travel as StarPU-MPI data: one vector per rank, owned by
 * it, tags first_tag .. first_tag + size - 1 (every rank calls this at the same point). */
int nl_mpi_gather_rows(int64_t n, const int64_t *mine, int64_t *all, int64_t first_tag)
{
    int rank, size;
    starpu_mpi_comm_rank(nl_mpi_comm, &rank);
    starpu_mpi_comm_size(nl_mpi_comm, &size);
    int64_t *rows = calloc((size_t)size * n, sizeof *rows);
    starpu_data_handle_t *h = malloc(size * sizeof *h);
    if (!rows || !h) { free(rows); free(h); return -ENOMEM; }
    memcpy(rows + (size_t)rank * n, mine, n * sizeof *rows);
    for (int r = 0; r < size; r++) {
        starpu_vector_data_register(&h[r], STARPU_MAIN_RAM, (uintptr_t)(rows + (size_t)r * n),
                                    n, sizeof *rows);
        starpu_mpi_data_register_comm(h[r], first_tag + r, r, nl_mpi_comm);
    }
    for (int r = 0; r < size; r++)   /* blocking on the owner and on rank 0 */
        starpu_mpi_get_data_on_node(nl_mpi_comm, h[r], 0);
    for (int r = 0; r < size; r++) {
        if (rank == 0) {   /* the received value back into rows (its home) */
            starpu_data_acquire(h[r], STARPU_R);
            starpu_data_release(h[r]);
        }
        starpu_data_unregister(h[r]);
    }
    if (rank == 0) memcpy(all, rows, (size_t)size * n * sizeof *rows);
    free(rows);
    free(h);
    return 0;
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
void nl_mpi_comm_bytes(int64_t *out) { (void)out; }
int nl_mpi_gather_rows(int64_t n, const int64_t *mine, int64_t *all, int64_t first_tag)
{ (void)n; (void)mine; (void)all; (void)first_tag; return -ENOSYS; }

#endif
