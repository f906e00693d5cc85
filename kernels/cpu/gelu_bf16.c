/* GELU for the bf16 precision modes (nntile_lab/nn/precision.py), fused with the
 * conversions the step would otherwise make in passes of their own:
 *   forward:  xk[i] = bf16(x[i]), out[i] = bf16(gelu(x[i])) — the MLP's hidden tile kept
 *             for the backward and its activation, which the next GEMM reads in bf16;
 *             no float32 activation tile is written
 *   backward: dx[i] = dy[i]·gelu'(widen(x[i])) + beta·dx[i] from the kept bf16 input,
 *             widened in registers (no float32 copy of it); beta == 0 overwrites dx
 * The same GELU as the float32 kernels (gelu.h). */
#include "prototypes.h"
#include <stdint.h>

#include "bf16.h"
#include "gelu.h"

void nl_gelu_bf16(int64_t n, const float *x, uint16_t *xk, uint16_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        xk[i] = nl_bf16_round(v);
        out[i] = nl_bf16_round(nl_gelu_value(v));
    }
}

void nl_gelu_backward_bf16(int64_t n, float beta, const uint16_t *x, const float *dy,
                           float *dx)
{
    if (beta == 0.0f)
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * nl_gelu_derivative(nl_bf16_widen(x[i]));
    else
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * nl_gelu_derivative(nl_bf16_widen(x[i])) + beta * dx[i];
}
