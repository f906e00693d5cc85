/* OpenCL program loading (once per runtime, every device) and kernel launches. */
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "../cpu/ids.h"

static struct starpu_opencl_program program;
static int loaded;

int nl_ocl_load(const char *source)
{
    if (loaded) nl_ocl_unload();
    /* StarPU builds the program for each OpenCL device and says the build log on failure.
     * Division and sqrt correctly rounded, as on the CPU (OpenCL allows 2.5 and 3 ulp) */
    char options[128];
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt -DNL_WG=%d", NL_OCL_WG);
    int ret = starpu_opencl_load_opencl_from_string(source, &program, options);
    if (ret) {
        nl_error("OpenCL: the kernels of kernels/opencl/ did not compile (code %d): see the "
                 "build log above", ret);
        return ret < 0 ? ret : -EINVAL;
    }
    loaded = 1;
    return 0;
}

void nl_ocl_unload(void)
{
    nl_ocl_gemm_forget();
    if (!loaded) return;
    starpu_opencl_unload_opencl(&program);
    loaded = 0;
}

/* Run kernel `name` over a work_dim NDRange of `global` items in groups of `local` (NULL:
 * the driver's choice), or with local[] chosen by pick(kernel, device, ...) when pick is
 * given, and wait for it */
typedef void (*nl_pick_local)(cl_kernel kernel, cl_device_id device, const int64_t *dims,
                              size_t *global, size_t *local);

static void launch(const char *name, cl_uint work_dim, size_t *global, nl_pick_local pick,
                   const int64_t *dims, int nargs, const size_t *sizes,
                   const void *const *values)
{
    int devid = starpu_worker_get_devid(starpu_worker_get_id());
    cl_kernel kernel;
    cl_command_queue queue;
    cl_int err = starpu_opencl_load_kernel(&kernel, &queue, &program, name, devid);
    if (err != CL_SUCCESS) {
        nl_error("OpenCL: no kernel %s on device %d: %s", name, devid,
                 starpu_opencl_error_string(err));
        return;
    }
    for (int i = 0; i < nargs && err == CL_SUCCESS; i++)
        err = clSetKernelArg(kernel, (cl_uint)i, sizes[i], values[i]);
    size_t local[2] = {1, 1};
    if (err == CL_SUCCESS && pick) {
        cl_device_id device;
        starpu_opencl_get_device(devid, &device);
        pick(kernel, device, dims, global, local);
    }
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(queue, kernel, work_dim, NULL, global, pick ? local : NULL,
                                     0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(queue);
    if (err != CL_SUCCESS)
        nl_error("OpenCL: kernel %s on device %d failed: %s", name, devid,
                 starpu_opencl_error_string(err));
    starpu_opencl_release_kernel(kernel);
}

void nl_ocl_launch(const char *name, int64_t n, int nargs, const size_t *sizes,
                   const void *const *values)
{
    if (n <= 0) return;
    size_t global = (size_t)n;
    launch(name, 1, &global, NULL, NULL, nargs, sizes, values);
}

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

static size_t pow2_ceil(int64_t v)
{
    size_t p = 1;
    while ((int64_t)p < v) p *= 2;
    return p;
}

/* The groups of an axis launch over dims = (m, k, n) (axis.clh): nx lanes along l (1 when
 * n == 1; at most NL_OCL_LANES: a GPU's loads coalesce over them), ny items along the
 * axis, nx·ny within NL_OCL_WG and what the kernel and the device allow */
static void pick_axis(cl_kernel kernel, cl_device_id device, const int64_t *dims,
                      size_t *global, size_t *local)
{
    int64_t m = dims[0], k = dims[1], n = dims[2];
    size_t kernel_wg = NL_OCL_WG, item_sizes[3] = {NL_OCL_WG, NL_OCL_WG, NL_OCL_WG};
    clGetKernelWorkGroupInfo(kernel, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                             &kernel_wg, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof item_sizes, item_sizes,
                    NULL);
    size_t wg = pow2_floor(kernel_wg < NL_OCL_WG ? kernel_wg : NL_OCL_WG);
    size_t nx = n == 1 ? 1 : pow2_ceil(n);
    nx = nx < NL_OCL_LANES ? nx : NL_OCL_LANES;
    nx = nx < wg ? nx : wg;
    nx = nx < pow2_floor(item_sizes[0]) ? nx : pow2_floor(item_sizes[0]);
    size_t ny = pow2_ceil(k);
    ny = ny < wg / nx ? ny : wg / nx;
    ny = ny < pow2_floor(item_sizes[1]) ? ny : pow2_floor(item_sizes[1]);
    local[0] = nx;
    local[1] = ny;
    global[0] = (size_t)m * (((size_t)n + nx - 1) / nx) * nx;
    global[1] = ny;
}

void nl_ocl_launch_axis(const char *name, int64_t m, int64_t k, int64_t n, int nargs,
                        const size_t *sizes, const void *const *values)
{
    if (m <= 0 || n <= 0) return;
    const int64_t dims[3] = {m, k, n};
    size_t global[2];
    launch(name, 2, global, pick_axis, dims, nargs, sizes, values);
}

int nl_ocl_devices(int accelerators_only)
{
    cl_platform_id platforms[16];
    cl_uint nplat = 0;
    if (clGetPlatformIDs(16, platforms, &nplat) != CL_SUCCESS) return 0;
    cl_device_type type = accelerators_only ? CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR
                                            : CL_DEVICE_TYPE_ALL;
    int total = 0;
    for (cl_uint p = 0; p < nplat && p < 16; p++) {
        cl_uint n = 0;
        if (clGetDeviceIDs(platforms[p], type, 0, NULL, &n) == CL_SUCCESS) total += (int)n;
    }
    return total;
}

void nl_ocl_zero_tile(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    cl_command_queue queue;
    starpu_opencl_get_current_queue(&queue);
    const int zero = 0;   /* any element type: all-zero bytes */
    size_t bytes = (size_t)STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]);
    cl_int err = bytes % sizeof zero ? CL_INVALID_BUFFER_SIZE : CL_SUCCESS;
    if (err == CL_SUCCESS && bytes)
        err = clEnqueueFillBuffer(queue, (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[0]), &zero,
                                  sizeof zero, STARPU_VECTOR_GET_OFFSET(buffers[0]), bytes, 0,
                                  NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(queue);
    if (err != CL_SUCCESS)
        nl_error("OpenCL: zeroing a fresh tile of %zu bytes failed: %s", bytes,
                 starpu_opencl_error_string(err));
}

/* 1 if ids (n values on the device) are all in [0, vocab); else 0, the error said.
 * A kernel cannot report an error, so the ids tile is read back from the device (n int64
 * values: one token tile) and checked on the host with the CPU kernels' own check
 * (kernels/cpu/ids.c), which gives the same error wherever the task ran. Only the one
 * task per token tile with the check set pays for the read. */
int nl_ocl_ids_in_range(const char *op, const char *what, int64_t n, int64_t vocab, cl_mem ids)
{
    if (n <= 0) return 1;
    int64_t *host = malloc((size_t)n * sizeof *host);
    if (!host) {
        nl_error("%s on OpenCL: no memory to check %lld %ss", op, (long long)n, what);
        return 0;
    }
    cl_command_queue queue;
    starpu_opencl_get_current_queue(&queue);
    cl_int err = clEnqueueReadBuffer(queue, ids, CL_TRUE, 0, (size_t)n * sizeof *host, host,
                                     0, NULL, NULL);
    int ok = err == CL_SUCCESS && nl_ids_in_range(op, what, n, vocab, host);
    if (err != CL_SUCCESS)
        nl_error("%s on OpenCL: reading the %ss back failed: %s", op, what,
                 starpu_opencl_error_string(err));
    free(host);
    return ok;
}
