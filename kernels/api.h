/* The C API the Python side calls (parsed by cffi's cdef as well: keep it free
 * of preprocessor lines). starpu_data_handle_t comes from starpu.h in C and
 * from the cdef prelude in Python. */

/* One finished task (times in µs since starpu_init; ready = pushed to the
 * scheduler once its dependencies were met, acquire = its data was in place).
 * handles/modes: the first nbuffers data it accessed, modes as StarPU's
 * enum starpu_data_access_mode bits (R 1, W 2, REDUX 8, COMMUTE 16). */
struct nl_task_record {
    int64_t task_id;
    int op, phase, layer, worker, priority, nbuffers;
    double submit_us, ready_us, acquire_us, start_us, end_us, flops, bytes;
    uint64_t handles[8];
    int modes[8];
};
struct nl_worker_stats { double total_us, executing_us, sleeping_us, flops; int64_t tasks; };
struct nl_bus_stats { int src, dst; int64_t bytes, count; double total_us; };
struct nl_mem_sample { double t_us; int node; int64_t used; };
/* One entry of a history-based performance model (kernels/runtime/perfmodels.c): op, the
 * kind of worker as its `where` bit (STARPU_CPU, STARPU_OPENCL, ...), device, footprint,
 * data size, mean and standard deviation of the measured times, samples. */
struct nl_model_entry {
    int op, arch, devid, ncores, nsample;
    uint32_t footprint;
    int64_t size;
    double mean_us, std_us;
};

int nl_init(const char *sched, int ncpu, int nopencl, int ncuda, int profiling);
void nl_fini(void);
int nl_opencl_built(void);
int nl_opencl_devices(int accelerators_only);
int nl_opencl_memory_node(void);
int nl_cuda_built(void);
int nl_cuda_devices(void);
int nl_cuda_memory_node(void);
int nl_tile_acquire_on_node(starpu_data_handle_t h, int node, int write);
void nl_tile_release_on_node(starpu_data_handle_t h, int node);
uintptr_t nl_tile_pointer_on_node(starpu_data_handle_t h, int node);
int nl_node_devid(int node);
starpu_data_handle_t nl_register_on_node(int node, uintptr_t ptr, int64_t nelems,
                                         size_t elemsize);
void nl_unregister_now(starpu_data_handle_t h);
void nl_set_where(int kind);
void nl_set_where_fallback(int kind);
int nl_unplaceable_op(void);
int nl_sched_policies(const char **names, int max);
int nl_heteroprio_levels(void);
int nl_heteroprio_bucket_of(int kinds, int priority);
int64_t nl_perfmodel_entries(struct nl_model_entry *out, int64_t max);
int nl_take_error(char *buf, int len);
void nl_set_scope(int priority, int layer, int phase);
void nl_trace_enable(int on);
void nl_trace_clear(void);
int64_t nl_trace_drain(struct nl_task_record *out, int64_t max);
int64_t nl_trace_count(void);
int nl_worker_stats(int worker, struct nl_worker_stats *out);
int nl_bus_stats(int bus, struct nl_bus_stats *out);
void nl_memory_sample(void);
int nl_sampler_start(double period_ms);
void nl_sampler_stop(void);
int64_t nl_samples_drain(struct nl_mem_sample *out, int64_t max, int keep);
int64_t nl_samples_count(void);
void nl_register_tiles(int64_t n, const int64_t *nelems, size_t elemsize,
                       starpu_data_handle_t *out);
void nl_unregister_tiles(int64_t n, starpu_data_handle_t *handles, int sync);
int nl_disk_register(const char *dir, int64_t bytes);
int64_t nl_held_bytes(void);
/* The memory guard (kernels/runtime/guard.c): admission against RAM limit + disk node, and
 * the progress count the watchdog reads */
void nl_guard_set(int64_t capacity_bytes, int nworkers);
int64_t nl_guard_reserve(int64_t task_bytes);
int64_t nl_guard_max_task(void);
int64_t nl_guard_submitted(void);
void nl_guard_stall(int on);
int nl_guard_stalled(void);
int nl_guard_refused(int64_t *task_bytes, int64_t *live_bytes);
int64_t nl_guard_relieve(unsigned node, int64_t bytes);
int64_t nl_guard_repay(void);
void nl_set_task_bytes_limit(int64_t bytes);
int64_t nl_refused_task(int *op_id);
void nl_set_device_task_limit(int64_t bytes);
int64_t nl_device_refused_task(int *op_id, int64_t *largest_tile);
starpu_data_handle_t *nl_tiles_new(int64_t n);
void nl_tiles_release(starpu_data_handle_t *h);
int64_t nl_tiles_unregister_all(void);
int64_t nl_tiles_unregister_all_lazily(double timeout_s);
int64_t nl_tiles_live(void);
int nl_wait_all(int timeout_ms);
struct nl_ready;
struct nl_ready *nl_ready_start(int64_t n, starpu_data_handle_t *handles, int write);
int nl_ready_wait(struct nl_ready *g, int timeout_ms);
void nl_ready_drop(struct nl_ready *g);
int nl_tile_copy(starpu_data_handle_t handle, int to_tile, char *array, int ndim,
                 const int64_t *shape, const int64_t *strides, size_t elemsize);
int nl_disk_register_backend(const char *dir, int64_t bytes, int o_direct);
void nl_disk_counters(int64_t *out, int reset);
void nl_hint_tiles(int64_t n, starpu_data_handle_t *handles, int kind);
int nl_hint_after(starpu_data_handle_t trigger, int64_t n, starpu_data_handle_t *handles,
                  int kind);
int nl_malloc_fixed_threshold(int bytes);
void nl_buffer_cache(int64_t cap);
void nl_buffer_cache_stats(int64_t *out);
/* StarPU-MPI (kernels/mpi.c; -ENOSYS when built without MPI headers) */
int nl_mpi_available(void);
int nl_mpi_init(int *rank, int *size);
int nl_mpi_shutdown(void);
void nl_mpi_register_tiles(int64_t n, starpu_data_handle_t *handles, const int *owners,
                           int64_t first_tag);
void nl_mpi_get_all(int64_t n, starpu_data_handle_t *handles);
void nl_mpi_flush(int64_t n, starpu_data_handle_t *handles);
int nl_mpi_wait_for_all(void);
int nl_mpi_barrier(void);
void nl_mpi_abort(int code);
void nl_mpi_comm_bytes(int64_t *out);
int nl_mpi_gather_rows(int64_t n, const int64_t *mine, int64_t *all, int64_t first_tag);
/* Kernel benchmark (kernels/bench.c; nl_call_op is generated from the codelet table) */
int nl_call_op(int op, void **p, const double *a);
double nl_time_op(int op, void **p, const double *a, int64_t calls);
double nl_time_op_cpu(int op, void **p, const double *a, int64_t calls, double *cpu_seconds);
double nl_time_stream(int kind, int64_t n, float *a, const float *b, const float *c,
                      int64_t calls);
double nl_time_vexp(int64_t n, const float *x, float *y, int64_t calls);
const char *nl_build_isa(void);
const char *nl_build_cflags(void);
