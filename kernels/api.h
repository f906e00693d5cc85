/* The C API the Python side calls (parsed by cffi's cdef as well: keep it free
 * of preprocessor lines). starpu_data_handle_t comes from starpu.h in C and
 * from the cdef prelude in Python. */
struct nl_task_record {
    int op, phase, layer, worker, priority;
    double submit_us, acquire_us, start_us, end_us, flops;
};

int nl_init(const char *sched, int ncpu, int profiling);
int nl_sched_policies(const char **names, int max);
int nl_take_error(char *buf, int len);
void nl_set_scope(int priority, int layer, int phase);
void nl_trace_enable(int on);
int64_t nl_trace_drain(struct nl_task_record *out, int64_t max);
int64_t nl_trace_count(void);
void nl_register_tiles(int64_t n, const int64_t *nelems, size_t elemsize,
                       starpu_data_handle_t *out);
void nl_unregister_tiles(int64_t n, starpu_data_handle_t *handles, int sync);
int nl_disk_register(const char *dir, int64_t bytes);
