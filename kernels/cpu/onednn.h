/* oneDNN's bf16 matmul at one thread, shared by the products with a float32 C
 * (gemm_bf16.c) and with a bf16 C (gemm_c16.c). */
#pragma once
#include <stdint.h>
#include <oneapi/dnnl/dnnl.h>

int nl_dnnl_gemm(const char *who, int64_t batch, int64_t m, int64_t n, int64_t k,
                 int32_t trans_a, int32_t trans_b, float alpha, float beta,
                 dnnl_data_type_t c_type, const uint16_t *a, const uint16_t *b, void *c);
