/* GEMM on the OpenCL worker through CLBlast (a tuned OpenCL BLAS; never a hand-written
 * kernel): the same contract as kernels/cpu/gemm.c, on row-major tiles in device memory,
 *   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b],  b < batch
 * in one strided-batched call. CLBlast compiles its kernels for a device on first use
 * and caches them. The call is enqueued on the worker's queue and finished before the
 * task returns (a synchronous OpenCL codelet). */
#include "launch.h"

#include <clblast_c.h>

void nl_ocl_gemm_forget(void)
{
    CLBlastClearCache();   /* its programs and binaries: nothing reuses them after shutdown */
}

void nl_ocl_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t trans_a,
                 int32_t trans_b, float alpha, float beta, cl_mem a, cl_mem b, cl_mem c)
{
    if (batch == 0 || m == 0 || n == 0) return;
    cl_command_queue queue;
    starpu_opencl_get_current_queue(&queue);
    cl_int err;
    if (beta == 0.0f) {   /* C may be uninitialised (W mode): no 0·NaN from its old bytes */
        const float zero = 0.0f;
        err = clEnqueueFillBuffer(queue, c, &zero, sizeof zero, 0,
                                  (size_t)(batch * m * n) * sizeof zero, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            nl_error("gemm on OpenCL: clearing C failed: %s", starpu_opencl_error_string(err));
            return;
        }
    }
    CLBlastStatusCode s = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, (size_t)m, (size_t)n, (size_t)k,
        alpha, a, 0, (size_t)(trans_a ? m : k), (size_t)(m * k),
        b, 0, (size_t)(trans_b ? k : n), (size_t)(k * n), beta,
        c, 0, (size_t)n, (size_t)(m * n), (size_t)batch, &queue, NULL);
    if (s != CLBlastSuccess) {
        nl_error("gemm on OpenCL: CLBlastSgemmStridedBatched failed with status %d "
                 "(batch %lld, m %lld, n %lld, k %lld)", (int)s, (long long)batch,
                 (long long)m, (long long)n, (long long)k);
        return;
    }
    err = clFinish(queue);
    if (err != CL_SUCCESS)
        nl_error("gemm on OpenCL: clFinish failed: %s", starpu_opencl_error_string(err));
}
