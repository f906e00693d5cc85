/* OpenCL program loading (once per runtime, every device) and kernel launches. */
#include "launch.h"

#include <errno.h>
#include <stdio.h>

static struct starpu_opencl_program program;
static int loaded;

int nl_ocl_load(const char *source)
{
    if (loaded) nl_ocl_unload();
    /* StarPU builds the program for each OpenCL device and says the build log on failure.
     * Division and sqrt correctly rounded, as on the CPU (OpenCL allows 2.5 and 3 ulp) */
    int ret = starpu_opencl_load_opencl_from_string(source, &program, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt");
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
    if (!loaded) return;
    starpu_opencl_unload_opencl(&program);
    loaded = 0;
}

void nl_ocl_launch(const char *name, int64_t n, int nargs, const size_t *sizes,
                   const void *const *values)
{
    if (n <= 0) return;
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
    size_t global = (size_t)n;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(queue);
    if (err != CL_SUCCESS)
        nl_error("OpenCL: kernel %s on device %d failed: %s", name, devid,
                 starpu_opencl_error_string(err));
    starpu_opencl_release_kernel(kernel);
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
