"""The codelet table: one row per op, from which the build generates the StarPU
codelet, its history-based performance model and the cffi submit helper.

Row fields:
  name     the op; its C kernel is ``nl_<name>`` and its submit helper
           ``nl_submit_<name>(handles..., args...)``
  buffers  access mode, dtype and name of each tile the task touches, in order:
           ``R x, RW:i64 ids, W y`` (modes R, W, RW; RWC = RW commuting with
           other RWC accesses; dtype f32 unless ``:i64``)
  args     the scalar arguments packed into the task, ``i64 m, f32 alpha``
  flops    a C expression of the args: the task's flop count (traces, GFLOP/s)

The kernel's C signature is ``void nl_<name>(args..., buffers...)``: plain C
with no StarPU in it, so a kernel can be read and tested on its own.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Codelet:
    name: str
    buffers: str
    args: str
    flops: str


CODELETS = [
    # elementwise.c
    Codelet("fill", "W y", "i64 n, f32 value", "0"),
    Codelet("fill_i64", "W:i64 y", "i64 n, i64 value", "0"),
    Codelet("copy", "R x, W y", "i64 n", "0"),
    Codelet("copy_i64", "R:i64 x, W:i64 y", "i64 n", "0"),
    Codelet("axpby", "R x, RW y", "i64 n, f32 alpha, f32 beta", "3*n"),
    Codelet("scale", "R x, W y", "i64 n, f32 alpha", "n"),
    Codelet("mul", "R a, R b, W y", "i64 n, f32 alpha", "2*n"),
    Codelet("gelu", "R x, W y", "i64 n", "15*n"),
    Codelet("gelu_backward", "R x, R dy, RW dx", "i64 n, f32 beta", "25*n"),
    # gemm.c
    Codelet("gemm", "R a, R b, RW c",
            "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha, f32 beta",
            "2.0*batch*m*n*k"),
]
