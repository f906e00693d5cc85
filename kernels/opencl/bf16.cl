/* float32 <-> bfloat16 on the OpenCL worker: the integer formulas of kernels/cpu/bf16.c,
 * so the device rounds bit for bit as the CPU does (nearest, ties to even; a NaN stays
 * a quiet NaN; above bf16's largest finite value: infinity). A bf16 is a ushort, the
 * upper 16 bits of the float32. */

__kernel void nl_f32_to_bf16(long n, __global const float *x, __global ushort *y)
{
    long i = get_global_id(0);
    if (i >= n) return;
    uint u = as_uint(x[i]);
    uint rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint quiet_nan = (u >> 16) | 0x40u;
    y[i] = (ushort)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

__kernel void nl_bf16_to_f32(long n, __global const ushort *x, __global float *y)
{
    long i = get_global_id(0);
    if (i < n) y[i] = as_float((uint)x[i] << 16);
}
