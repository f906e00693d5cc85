enum starpu_data_access_mode { STARPU_R, STARPU_W, STARPU_RW, ... };
int starpu_data_acquire(starpu_data_handle_t handle, enum starpu_data_access_mode mode);
void starpu_data_release(starpu_data_handle_t handle);
void *starpu_data_get_local_ptr(starpu_data_handle_t handle);
void starpu_data_invalidate_submit(starpu_data_handle_t handle);
void starpu_data_wont_use(starpu_data_handle_t handle);
int starpu_task_wait_for_all(void);
void starpu_shutdown(void);
unsigned starpu_worker_get_count(void);
unsigned starpu_cpu_worker_get_count(void);
ssize_t starpu_memory_get_total(unsigned node);
ssize_t starpu_memory_get_available(unsigned node);
#define STARPU_MAXCPUS ...
int starpu_profiling_status_set(int status);
int starpu_profiling_status_get(void);
double starpu_timing_now(void);
void starpu_worker_get_name(int id, char *dst, size_t maxlen);
unsigned starpu_memory_nodes_get_count(void);
int starpu_memory_node_get_name(unsigned node, char *name, size_t size);
int starpu_bus_get_count(void);
void starpu_bound_start(int deps, int prio);
void starpu_bound_stop(void);
void starpu_bound_compute(double *res, double *integer_res, int integer);
#define STARPU_PROFILING_ENABLE ...
#define STARPU_PROFILING_DISABLE ...
void starpu_pause(void);
void starpu_resume(void);
int starpu_task_nsubmitted(void);
#define STARPU_CPU ...
#define STARPU_OPENCL ...
#define STARPU_CUDA ...
#define STARPU_MAXOPENCLDEVS ...
unsigned starpu_opencl_worker_get_count(void);
#define STARPU_CUDA ...
#define STARPU_MAXCUDADEVS ...
unsigned starpu_cuda_worker_get_count(void);
unsigned starpu_data_is_on_node(starpu_data_handle_t handle, unsigned node);
