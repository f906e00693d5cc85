"""The codelet table: one row per op, from which the build generates the StarPU
codelet, its history-based performance model and the cffi submit helper — and, for a row
with a formula, the kernels themselves, in C, OpenCL and CUDA (kernels/formulas.py).

Row fields:
  name     the op; its C kernel is ``nl_<name>`` and its submit helper
           ``nl_submit_<name>(handles..., args...)``
  buffers  access mode, dtype and name of each tile the task touches, in order:
           ``R x, RW:i64 ids, W y`` (modes R, W, RW; RWC = RW commuting with
           other RWC accesses; dtype f32 unless ``:i64`` or ``:bf16``)
  args     the scalar arguments packed into the task, ``i64 m, f32 alpha``
  flops    a C expression of the args: the task's flop count (traces, GFLOP/s)
  overwrite  a C condition on the args under which the RW tiles are written without
           being read (e.g. ``beta == 0``); the task then takes them in W mode
  family   the kernels' family: a hand-written kernel of the row lives in
           ``kernels/cpu/<family>.c``, ``kernels/opencl/<family>.cl`` (or ``.c``: a host
           function) and ``kernels/cuda/<family>.cu``, the same name in each back end, or
           in a part of the family, ``<family>_<part>.<ext>`` (gemm_bf16.c: oneDNN's)
           (set by ``family()`` below, one group of rows at a time)

The kernels, written once or by hand:
  formula  C statements over one value, from which the build generates the C kernel, the
           OpenCL kernel and the CUDA kernel (kernels/formulas.py): a buffer's bare name is
           its value at the current index, the row's scalar arguments are themselves, the
           functions are kernels/formula.h's (nl_exp, nl_sigmoid, nl_bf16_round, ...).
           The index space comes from the first arguments: ``i64 n`` (n values), or
           ``i64 m, i64 k, i64 n`` (a tile viewed as (m, k, n), kernels/cpu/axis.h: slices
           read as ``s[e]``, fibers as ``gamma[j]``, ``mn`` = m·n). ``overwrite`` in a
           formula is the row's overwrite condition (the output may be uninitialised: do
           not read it then). Such a row has OpenCL and CUDA kernels with nothing more.
  per_slice  (m, k, n) rows: statements computing locals from slices (indexed by e) and
           arguments alone, once per fiber where the C kernel can (the axis the last one)
  per_fiber  the same from fibers (indexed by j): once per row of n values (n > 1)
  (none)   a kernel written by hand in each back end it has: ``nl_<name>`` in
           kernels/cpu/<family>.c, and the two below

Rows of the element-wise family also carry their Python op, whose tile loop the build
generates (``nntile_lab/ops/_generated.py``, one task per tile):
  py       its signature: ``gelu(x, out=None)``. Its parameters are the row's buffers
           (the R ones are the inputs, the one W or RW buffer the output) and its
           scalar arguments other than ``n``; a W output has the default ``None`` (a new
           tensor), an RW output is updated in place (``beta`` scales its old value).
           The op's name is the row's, except the rows kept under their BLAS name
           (``axpby`` is ``add``)
  doc      its formula in words: the first line of the op's docstring, and the generated
           kernels' comment (a formula row needs one)
  exps     a C expression of the args: the exps the kernel computes (the kernel
           benchmark's exp roof); "0" for most
  width    which tile of the model the op runs on, for the kernel benchmark's sizes:
           "embd" (the residual stream, n_embd wide) or "inner" (the MLP's hidden layer)

A row without a formula may carry hand-written OpenCL and CUDA implementations (the OpenCL
worker and the CUDA one, docs/accelerators.md):
  opencl   "kernel": kernel ``nl_<name>`` of kernels/opencl/<family>.cl, taking the row's
           args then its buffers, over ``opencl_items`` work items (a C expression of the
           args, default "n": one per value); "axis": the same kernel as an axis launch
           (kernels/opencl/axis.clh: work-groups reducing along an axis) over
           ``opencl_axis``, three C expressions of the args (default "m, k, n": the m·n
           reductions of length k of an (m, k, n) tile); "host": a C function
           ``nl_ocl_<name>`` in kernels/opencl/<family>.c with the C kernel's parameters,
           buffers as ``cl_mem`` (GEMM: CLBlast); "": CPU only.
  cuda     "kernel": a host function ``nl_cu_<name>(stream, args..., buffers...)`` of
           kernels/cuda/<family>.cu that launches its kernels on the worker's stream;
           "cublas": the same with a cuBLAS handle first (GEMM). Same formula as the C
           kernel. "": no CUDA.

The kernel's C signature is ``void nl_<name>(args..., buffers...)``: plain C
with no StarPU in it, so a kernel can be read and tested on its own.
"""
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Codelet:
    name: str
    buffers: str
    args: str
    flops: str
    # a C condition on the args under which the kernel writes its RW tiles without
    # reading them (beta == 0: the BLAS rule): such a task takes them in W mode, so
    # StarPU neither zero-fills a fresh tile first nor, out of core, reads an evicted one
    overwrite: str = ""
    # the element-wise family: the Python op generated from the row (see above)
    py: str = ""
    doc: str = ""
    exps: str = "0"
    width: str = "embd"
    # the OpenCL implementation, if any: "kernel" (kernel nl_<name> in
    # kernels/opencl/<family>.cl, one work item per value, the row's args then buffers)
    # or "host" (a C function nl_ocl_<name> in kernels/opencl/<family>.c, e.g. CLBlast's GEMM)
    opencl: str = ""
    # opencl="kernel": how many work items, a C expression of the args (one per value)
    opencl_items: str = "n"
    # the CUDA implementation, if any: "kernel" (host function nl_cu_<name> in
    # kernels/cuda/<family>.cu, given the worker's stream) or "cublas" (given its handle)
    cuda: str = ""
    # opencl="axis": the launch's (m, k, n), m·n reductions of length k (axis.clh)
    opencl_axis: str = "m, k, n"
    # the kernels written once: C statements over one value (see above)
    formula: str = ""
    per_slice: str = ""
    per_fiber: str = ""
    # reductions written once (see above): "slice" or "fiber", the sums and their statements
    reduce: str = ""
    sums: str = ""
    accumulate: str = ""
    store: str = ""
    family: str = ""

    def __post_init__(self):
        # a formula is compiled for every back end: one OpenCL work item and one CUDA
        # thread per value of its index space
        if self.reduce:   # an axis launch: one work-group column per result
            object.__setattr__(self, "opencl", self.opencl or "axis")
            object.__setattr__(self, "cuda", self.cuda or "kernel")
            if self.reduce == "fiber":
                object.__setattr__(self, "opencl_axis", "n == 1 ? 1 : k, n == 1 ? m : m*n, "
                                                        "n == 1 ? k : 1")
        elif self.formula:
            mkn = [a.split()[-1] for a in self.args.split(",")[:3]] == ["m", "k", "n"]
            object.__setattr__(self, "opencl", self.opencl or "kernel")
            object.__setattr__(self, "cuda", self.cuda or "kernel")
            object.__setattr__(self, "opencl_items", "m*k*n" if mkn else "n")


def family(name, *rows):
    """rows, each of family ``name``"""
    return [replace(r, family=name) for r in rows]


CODELETS = [
    # element-wise on n values, generated from their formulas
    *family(
        "elementwise",
        Codelet("fill", "W y", "i64 n, f32 value", "0", doc="y[i] = value.",
                formula="y = value"),
        Codelet("fill_i64", "W:i64 y", "i64 n, i64 value", "0", doc="y[i] = value (int64).",
                formula="y = value"),
        # fill ordered after the tasks writing ``after`` (read, not used): a tile created
        # just before its first use (out of core: never evicted as zeros)
        Codelet("fill_after", "R after, W y", "i64 n, f32 value", "0",
                doc="y[i] = value, after the tasks writing ``after`` (not read).",
                formula="y = value"),
        Codelet("copy", "R x, W y", "i64 n", "0", doc="y[i] = x[i].", formula="y = x"),
        Codelet("copy_i64", "R:i64 x, W:i64 y", "i64 n", "0", doc="y[i] = x[i] (int64).",
                formula="y = x"),
        Codelet("axpby", "R x, RW y", "i64 n, f32 alpha, f32 beta", "3*n",
                overwrite="beta == 0", py="add(x, y, alpha=1.0, beta=1.0)",
                doc="y[i] = α·x[i] + β·y[i], in place (β = 0 overwrites y). "
                    "``axpy`` is β = 1.",
                formula="y = overwrite ? alpha * x : alpha * x + beta * y"),
        Codelet("scale", "R x, W out", "i64 n, f32 alpha", "n",
                py="scale(x, alpha, out=None)", doc="out[i] = α·x[i].",
                formula="out = alpha * x"),
        Codelet("mul", "R a, R b, W out", "i64 n, f32 alpha", "2*n",
                py="mul(a, b, out=None, alpha=1.0)", doc="out[i] = α·a[i]·b[i].",
                formula="out = alpha * a * b"),
        Codelet("gelu", "R x, W out", "i64 n", "15*n", exps="n", width="inner",
                py="gelu(x, out=None)",
                doc="out[i] = x[i]/2 · (1 + tanh(√(2/π)·(x[i] + 0.044715·x[i]³)))  "
                    "(GPT-2's GELU).",
                formula="out = nl_gelu_value(x)"),
        Codelet("gelu_backward", "R x, R dy, RW dx", "i64 n, f32 beta", "25*n",
                overwrite="beta == 0", exps="n", width="inner",
                py="gelu_backward(x, dy, dx=None, beta=0.0)",
                doc="dx[i] = dy[i]·gelu'(x[i]) + β·dx[i] (β = 0: a new or overwritten dx).",
                formula="dx = dy * nl_gelu_derivative(x) + (overwrite ? 0.0f : beta * dx)"),
        Codelet("relu", "R x, W out", "i64 n", "n", width="inner", py="relu(x, out=None)",
                doc="out[i] = max(x[i], 0)  (ReLU; NaN stays NaN).",
                formula="out = x < 0.0f ? 0.0f : x"),
        # the derivative at 0 is 0, as PyTorch takes it
        Codelet("relu_backward", "R x, R dy, RW dx", "i64 n, f32 beta", "3*n",
                overwrite="beta == 0", width="inner", py="relu_backward(x, dy, dx=None, beta=0.0)",
                doc="dx[i] = dy[i]·[x[i] > 0] + β·dx[i] (β = 0: a new or overwritten dx).",
                formula="float d = x > 0.0f ? dy : 0.0f; dx = overwrite ? d : d + beta * dx"),
        # silu'(x) = σ(x) + x·σ(x)·(1 − σ(x)) = σ(x)·(1 + x·(1 − σ(x)))
        Codelet("silu", "R x, W out", "i64 n", "6*n", exps="n", width="inner",
                py="silu(x, out=None)",
                doc="out[i] = x[i]·σ(x[i]) = x[i] / (1 + exp(−x[i]))  (SiLU, or swish).",
                formula="float s, q; nl_sigmoid(x, &s, &q); out = x * s"),
        Codelet("silu_backward", "R x, R dy, RW dx", "i64 n, f32 beta", "11*n",
                overwrite="beta == 0", exps="n", width="inner",
                py="silu_backward(x, dy, dx=None, beta=0.0)",
                doc="dx[i] = dy[i]·σ(x[i])·(1 + x[i]·(1 − σ(x[i]))) + β·dx[i] (β = 0: a new or "
                    "overwritten dx).",
                formula="float s, q; nl_sigmoid(x, &s, &q); "
                        "dx = dy * (s * (1.0f + x * q)) + (overwrite ? 0.0f : beta * dx)"),
        # SwiGLU's gate (Llama's MLP: down(silu(gate(x))·up(x))), fused: y = silu(g)·u;
        #   dg = dy·u·silu'(g),  du = dy·silu(g)
        Codelet("silu_gate", "R g, R u, W out", "i64 n", "7*n", exps="n", width="inner",
                py="silu_gate(g, u, out=None)",
                doc="out[i] = silu(g[i])·u[i] = g[i]·σ(g[i])·u[i]  (SwiGLU's gate).",
                formula="float s, q; nl_sigmoid(g, &s, &q); out = g * s * u"),
        Codelet("silu_gate_backward", "R g, R u, R dy, RW dg, RW du", "i64 n, f32 beta", "14*n",
                overwrite="beta == 0", exps="n", width="inner",
                doc="dg[i] = dy[i]·u[i]·silu'(g[i]) + β·dg[i], du[i] = dy[i]·silu(g[i]) + "
                    "β·du[i] (β = 0: new or overwritten dg, du).",
                formula="float s, q; nl_sigmoid(g, &s, &q); "
                        "float vg = dy * u * (s * (1.0f + g * q)); float vu = dy * (g * s); "
                        "dg = overwrite ? vg : vg + beta * dg; "
                        "du = overwrite ? vu : vu + beta * du"),
    ),
    # reductions and broadcasts along an axis of an (m, k, n) tile
    *family(
        "axis",
        # alpha·(the sums) + beta·(the old value), rounded once; beta == 0 overwrites
        Codelet("sum_slice", "R x, RW s", "i64 m, i64 k, i64 n, f32 alpha, f32 beta",
                "m*k*n + 3*m*n", overwrite="beta == 0",
                doc="s[i,l] = α·Σ_j x[i,j,l] + β·s[i,l].",
                reduce="slice", sums="acc", accumulate="acc += x",
                store="s[e] = (float)(alpha * acc + (overwrite ? 0 : (nl_acc)beta * s[e]))"),
        Codelet("sumsq_slice", "R x, RW s", "i64 m, i64 k, i64 n, f32 alpha, f32 beta",
                "2*m*k*n + 3*m*n", overwrite="beta == 0",
                doc="s[i,l] = α·Σ_j x[i,j,l]² + β·s[i,l].",
                reduce="slice", sums="acc", accumulate="acc += (nl_acc)x * x",
                store="s[e] = (float)(alpha * acc + (overwrite ? 0 : (nl_acc)beta * s[e]))"),
        Codelet("sumprod_slice", "R a, R b, RW s", "i64 m, i64 k, i64 n, f32 alpha, f32 beta",
                "2*m*k*n + 3*m*n", overwrite="beta == 0",
                doc="s[i,l] = α·Σ_j a[i,j,l]·b[i,j,l] + β·s[i,l].",
                reduce="slice", sums="acc", accumulate="acc += (nl_acc)a * b",
                store="s[e] = (float)(alpha * acc + (overwrite ? 0 : (nl_acc)beta * s[e]))"),
        Codelet("max_slice", "R x, RW s", "i64 m, i64 k, i64 n, i32 accumulate", "m*k*n",
                opencl="axis", cuda="kernel"),
        Codelet("sum_fiber", "R x, RW f", "i64 m, i64 k, i64 n, f32 alpha, f32 beta",
                "m*k*n + 3*k", overwrite="beta == 0",
                doc="f[j] = α·Σ_{i,l} x[i,j,l] + β·f[j].",
                reduce="fiber", sums="acc", accumulate="acc += x",
                store="f[j] = (float)(alpha * acc + (overwrite ? 0 : (nl_acc)beta * f[j]))"),
        Codelet("sumsq_all", "R x, RW s", "i64 n, f32 alpha, f32 beta", "2*n + 3",
                overwrite="beta == 0", opencl="axis", opencl_axis="1, n, 1", cuda="kernel"),
        Codelet("add_slice", "R s, RW x", "i64 m, i64 k, i64 n, f32 alpha, f32 beta", "3*m*k*n",
                overwrite="beta == 0", doc="x[i,j,l] = α·s[i,l] + β·x[i,j,l].",
                formula="x = overwrite ? alpha * s[e] : alpha * s[e] + beta * x"),
        Codelet("mul_slice", "R s, RW x", "i64 m, i64 k, i64 n", "m*k*n",
                doc="x[i,j,l] = s[i,l]·x[i,j,l].", formula="x = x * s[e]"),
        Codelet("add_fiber", "R f, RW x", "i64 m, i64 k, i64 n, f32 alpha, f32 beta", "3*m*k*n",
                overwrite="beta == 0", doc="x[i,j,l] = α·f[j] + β·x[i,j,l].",
                per_fiber="float v = alpha * f[j]", formula="x = overwrite ? v : v + beta * x"),
        Codelet("mul_fiber", "R f, RW x", "i64 m, i64 k, i64 n", "m*k*n",
                doc="x[i,j,l] = f[j]·x[i,j,l].", formula="x = x * f[j]"),
    ),
    # softmax along an axis (flops count exp and a division as one each); the split-axis
    # passes and the formulas: kernels/cpu/softmax.c
    *family(
        "softmax",
        Codelet("softmax_sumexp", "R x, R mx, RW s", "i64 m, i64 k, i64 n, f32 beta",
                "3*m*k*n + 2*m*n", overwrite="beta == 0",
                doc="s[i,l] = Σ_j exp(x[i,j,l] − mx[i,l]) + β·s[i,l].",
                reduce="slice", per_slice="float mv = mx[e]", sums="acc",
                accumulate="acc += nl_exp(x - mv)",
                store="s[e] = (float)(acc + (overwrite ? 0 : (nl_acc)beta * s[e]))"),
        Codelet("softmax_apply", "R x, R mx, R s, W y", "i64 m, i64 k, i64 n", "3*m*k*n + m*n",
                doc="y[i,j,l] = exp(x[i,j,l] − mx[i,l]) / s[i,l]  (y may be x).",
                per_slice="float mv = mx[e], r = 1.0f / s[e]", formula="y = nl_exp(x - mv) * r"),
        Codelet("softmax_tile", "R x, W y", "i64 m, i64 k, i64 n", "5*m*k*n + m*n", opencl="axis",
                cuda="kernel"),
        # sums: four blocks of m·n, the float pairs hi, lo of Σ_j dy·y, then of Σ_j y (~48
        # bits between tasks), each + itself when accumulate
        Codelet("softmax_backward_sums", "R y, R dy, RW sums",
                "i64 m, i64 k, i64 n, i32 accumulate", "3*m*k*n + 8*m*n",
                doc="sums = (Σ_j dy·y, Σ_j y) as float pairs hi + lo (+ sums when accumulate).",
                reduce="slice", sums="sdy, sy",
                accumulate="sdy += (nl_acc)dy * y; sy += y",
                store="nl_acc v0 = sdy + (accumulate ? (nl_acc)sums[e] + sums[mn + e] : 0); "
                      "nl_acc v1 = sy + (accumulate ? (nl_acc)sums[2 * mn + e] "
                      "+ sums[3 * mn + e] : 0); "
                      "sums[e] = (float)v0; sums[mn + e] = (float)(v0 - sums[e]); "
                      "sums[2 * mn + e] = (float)v1; "
                      "sums[3 * mn + e] = (float)(v1 - sums[2 * mn + e])"),
        # sums: the float pairs hi + lo of Σ_j dy·y and of Σ_j y (softmax_backward_sums)
        Codelet("softmax_backward", "R y, R dy, R sums, RW dx", "i64 m, i64 k, i64 n, f32 beta",
                "4*m*k*n + 3*m*n", overwrite="beta == 0",
                doc="dx = y·(dy − s) + β·dx, s = Σ_j dy·y / Σ_j y from the pairs of sums.",
                per_slice="nl_acc s = ((nl_acc)sums[e] + sums[mn + e]) "
                          "/ ((nl_acc)sums[2 * mn + e] + sums[3 * mn + e])",
                formula="float v = (float)(y * (dy - s)); dx = overwrite ? v : v + beta * dx"),
        Codelet("softmax_backward_tile", "R y, R dy, RW dx", "i64 m, i64 k, i64 n, f32 beta",
                "7*m*k*n + m*n", overwrite="beta == 0",
                doc="dx = y·(dy − s) + β·dx, s = Σ_j dy·y / Σ_j y, the axis in the tile.",
                reduce="slice", sums="sdy, sy",
                accumulate="sdy += (nl_acc)dy * y; sy += y", store="nl_acc s = sdy / sy",
                formula="float v = (float)(y * (dy - s)); dx = overwrite ? v : v + beta * dx"),
    ),
    # layer normalisation along an axis (flops count a sqrt and a division as one each):
    # kernels/cpu/norm.c
    *family(
        "norm",
        Codelet("layer_norm_invstd", "R x, R mean, RW s",
                "i64 m, i64 k, i64 n, f32 alpha, f32 beta, f32 eps, i32 finish",
                "3*m*k*n + 6*m*n", overwrite="beta == 0",
                doc="v = α·Σ_j (x − mean)² + β·s;  s = finish ? 1/√(v + eps) : v.",
                reduce="slice", per_slice="float mu = mean[e]", sums="acc",
                accumulate="nl_acc d = (nl_acc)x - mu; acc += d * d",
                store="nl_acc v = alpha * acc + (overwrite ? 0 : (nl_acc)beta * s[e]); "
                      "s[e] = (float)(finish ? 1 / sqrt(v + eps) : v)"),
        Codelet("layer_norm_apply", "R x, R mean, R inv_std, R gamma, R bias, W y",
                "i64 m, i64 k, i64 n", "4*m*k*n",
                doc="y[i,j,l] = (x[i,j,l] − mean[i,l])·inv_std[i,l]·gamma[j] + bias[j]  "
                    "(y may be x).",
                per_slice="float mu = mean[e], r = inv_std[e]",
                formula="y = (x - mu) * r * gamma[j] + bias[j]"),
        Codelet("layer_norm_tile", "R x, R gamma, R bias, W y, W mean, W inv_std",
                "i64 m, i64 k, i64 n, f32 eps", "8*m*k*n + 6*m*n", opencl="axis", cuda="kernel"),
        # sums (two blocks of m·n) = α·(Σ_j g, Σ_j g·xhat) + β·sums, α = 1/K: their means
        Codelet("layer_norm_backward_sums", "R x, R dy, R gamma, R mean, R inv_std, RW sums",
                "i64 m, i64 k, i64 n, f32 alpha, f32 beta", "6*m*k*n + 6*m*n",
                overwrite="beta == 0",
                doc="sums = α·(Σ_j g, Σ_j g·xhat) + β·sums, g = dy·gamma[j], "
                    "xhat = (x − mean)·inv_std.",
                reduce="slice", per_slice="float mu = mean[e], r = inv_std[e]", sums="a1, a2",
                accumulate="nl_acc gv = (nl_acc)dy * gamma[j]; a1 += gv; "
                           "a2 += gv * (((nl_acc)x - mu) * r)",
                store="sums[e] = (float)(alpha * a1 + (overwrite ? 0 : (nl_acc)beta * sums[e])); "
                      "sums[mn + e] = (float)(alpha * a2 "
                      "+ (overwrite ? 0 : (nl_acc)beta * sums[mn + e]))"),
        # sums: mean_j g, then mean_j g·xhat (layer_norm_backward_sums)
        Codelet("layer_norm_backward_dx",
                "R x, R dy, R gamma, R mean, R inv_std, R sums, RW dx",
                "i64 m, i64 k, i64 n, f32 beta", "9*m*k*n", overwrite="beta == 0",
                doc="dx = r·(g − mean_j g − xhat·mean_j(g·xhat)) + β·dx, xhat = (x − mean)·r, "
                    "g = dy·gamma[j], r = inv_std.",
                per_slice="float mu = mean[e], r = inv_std[e]; "
                          "nl_acc s1 = sums[e], s2 = sums[mn + e]",
                formula="nl_acc xhat = ((nl_acc)x - mu) * r; nl_acc g = (nl_acc)dy * gamma[j]; "
                        "float v = (float)(r * (g - s1 - xhat * s2)); "
                        "dx = overwrite ? v : v + beta * dx"),
        Codelet("layer_norm_backward_tile", "R x, R dy, R gamma, R mean, R inv_std, RW dx",
                "i64 m, i64 k, i64 n, f32 beta", "15*m*k*n + 2*m*n",
                overwrite="beta == 0",
                doc="layer_norm_backward_dx with its sums, the axis in the tile.",
                reduce="slice", per_slice="float mu = mean[e], r = inv_std[e]", sums="a1, a2",
                accumulate="nl_acc gv = (nl_acc)dy * gamma[j]; a1 += gv; "
                           "a2 += gv * (((nl_acc)x - mu) * r)",
                store="nl_acc s1 = a1 / k, s2 = a2 / k",
                formula="nl_acc xhat = ((nl_acc)x - mu) * r; nl_acc g = (nl_acc)dy * gamma[j]; "
                        "float v = (float)(r * (g - s1 - xhat * s2)); "
                        "dx = overwrite ? v : v + beta * dx"),
        # dgamma and dbias apart from dx, so that their chain over all tiles stays off dx's
        # path; each with its own beta
        # RMS norm (Llama), with K values along the whole axis:
        #   r = 1/√(Σ_j x²/K + eps),  y = x·r·w[j];  backward, with xhat = x·r, g = dy·w[j]:
        #   dx = r·(g − xhat·mean_j(g·xhat)) + β·dx,  dw[j] = Σ_{i,l} dy·xhat + β·dw[j]
        # Split axis: rms_norm_invrms accumulates α·Σ_j x² tile after tile (α = 1/K; the last
        # one finishes r), rms_norm_apply writes y; backward: rms_norm_backward_sums
        # accumulates mean_j(g·xhat), rms_norm_backward_dx writes dx. rms_norm_backward_fiber
        # does dw apart, off dx's path. The *_tile rows: the axis in one tile, one task.
        Codelet("rms_norm_invrms", "R x, RW s",
                "i64 m, i64 k, i64 n, f32 alpha, f32 beta, f32 eps, i32 finish",
                "2*m*k*n + 6*m*n", overwrite="beta == 0",
                doc="v = α·Σ_j x² + β·s;  s = finish ? 1/√(v + eps) : v.",
                reduce="slice", sums="acc", accumulate="acc += (nl_acc)x * x",
                store="nl_acc v = alpha * acc + (overwrite ? 0 : (nl_acc)beta * s[e]); "
                      "s[e] = (float)(finish ? 1 / sqrt(v + eps) : v)"),
        Codelet("rms_norm_apply", "R x, R inv_rms, R w, W y", "i64 m, i64 k, i64 n", "2*m*k*n",
                doc="y[i,j,l] = x[i,j,l]·inv_rms[i,l]·w[j]  (y may be x).",
                per_slice="float r = inv_rms[e]", formula="y = x * r * w[j]"),
        Codelet("rms_norm_tile", "R x, R w, W y, W inv_rms", "i64 m, i64 k, i64 n, f32 eps",
                "4*m*k*n + 4*m*n",
                doc="inv_rms = 1/√(mean_j x² + eps), y = x·inv_rms·w[j]: the axis in the tile "
                    "(y may be x).",
                reduce="slice", sums="acc", accumulate="acc += (nl_acc)x * x",
                store="float r = (float)(1 / sqrt(acc / k + eps)); inv_rms[e] = r",
                formula="y = x * r * w[j]"),
        Codelet("rms_norm_backward_sums", "R x, R dy, R w, R inv_rms, RW sums",
                "i64 m, i64 k, i64 n, f32 alpha, f32 beta", "5*m*k*n + 3*m*n",
                overwrite="beta == 0",
                doc="sums = α·Σ_j g·xhat + β·sums, g = dy·w[j], xhat = x·inv_rms.",
                reduce="slice", per_slice="float r = inv_rms[e]", sums="acc",
                accumulate="acc += (nl_acc)dy * w[j] * ((nl_acc)x * r)",
                store="sums[e] = (float)(alpha * acc + (overwrite ? 0 : (nl_acc)beta * sums[e]))"),
        Codelet("rms_norm_backward_dx", "R x, R dy, R w, R inv_rms, R sums, RW dx",
                "i64 m, i64 k, i64 n, f32 beta", "6*m*k*n", overwrite="beta == 0",
                doc="dx = r·(g − xhat·s) + β·dx, xhat = x·r, g = dy·w[j], r = inv_rms, "
                    "s = sums (mean_j g·xhat).",
                per_slice="float r = inv_rms[e]; nl_acc s = sums[e]",
                formula="nl_acc g = (nl_acc)dy * w[j]; "
                        "float v = (float)(r * (g - (nl_acc)x * r * s)); "
                        "dx = overwrite ? v : v + beta * dx"),
        Codelet("rms_norm_backward_tile", "R x, R dy, R w, R inv_rms, RW dx",
                "i64 m, i64 k, i64 n, f32 beta", "11*m*k*n + m*n", overwrite="beta == 0",
                doc="rms_norm_backward_dx with its sums, the axis in the tile.",
                reduce="slice", per_slice="float r = inv_rms[e]", sums="acc",
                accumulate="acc += (nl_acc)dy * w[j] * ((nl_acc)x * r)",
                store="nl_acc s = acc / k",
                formula="nl_acc g = (nl_acc)dy * w[j]; "
                        "float v = (float)(r * (g - (nl_acc)x * r * s)); "
                        "dx = overwrite ? v : v + beta * dx"),
        Codelet("rms_norm_backward_fiber", "R x, R dy, R inv_rms, RW dw",
                "i64 m, i64 k, i64 n, f32 beta", "3*m*k*n + 3*k", overwrite="beta == 0",
                doc="dw[j] = Σ_{i,l} dy·x·inv_rms + β·dw[j].",
                reduce="fiber", sums="acc",
                accumulate="acc += (nl_acc)dy * ((nl_acc)x * inv_rms[e])",
                store="dw[j] = (float)(acc + (overwrite ? 0 : (nl_acc)beta * dw[j]))"),
        Codelet("layer_norm_backward_fiber", "R x, R dy, R mean, R inv_std, RW dgamma, RW dbias",
                "i64 m, i64 k, i64 n, f32 beta_gamma, f32 beta_bias", "6*m*k*n + 6*k",
                overwrite="beta_gamma == 0 && beta_bias == 0",
                doc="dgamma[j] = Σ_{i,l} dy·xhat + β_γ·dgamma[j], dbias[j] = Σ_{i,l} dy + "
                    "β_b·dbias[j].",
                reduce="fiber", sums="ag, ab",
                accumulate="ab += dy; ag += (nl_acc)dy * (((nl_acc)x - mean[e]) * inv_std[e])",
                store="dgamma[j] = (float)(ag + (overwrite || beta_gamma == 0 ? 0 "
                      ": (nl_acc)beta_gamma * dgamma[j])); "
                      "dbias[j] = (float)(ab + (overwrite || beta_bias == 0 ? 0 "
                      ": (nl_acc)beta_bias * dbias[j]))"),
    ),
    # Rotary position embedding in Hugging Face's rotate-half convention (Llama): each head's
    # D values as two halves x1, x2 of n = D/2, pair d rotated by the angle θ of the token's
    # position p: θ = p·rope_theta^(−2d/D) (nntile_lab.ops.rope_tables);
    #   y1 = x1·cos θ − x2·sin θ,  y2 = x2·cos θ + x1·sin θ
    # backward, the rotation's transpose: dx1 = dy1·cos θ + dy2·sin θ, dx2 = dy2·cos θ − dy1·sin θ.
    # A tile is seen as (m, k, 2n): m rows (batch, heads) of k tokens of D values; cos_t and
    # sin_t hold the k tokens' (k, n) tables. One item per pair: (i, j, l), l < n.
    *family(
        "rope",
        Codelet("rope", "R x, R cos_t, R sin_t, W y", "i64 m, i64 k, i64 n", "6*m*k*n",
                doc="y1 = x1·cos − x2·sin, y2 = x2·cos + x1·sin: each head's halves rotated "
                    "(y may be x).",
                formula="const int64_t a = (i * k + j) * 2 * n + l, t = j * n + l; "
                        "float x1 = x[a], x2 = x[a + n], c = cos_t[t], s = sin_t[t]; "
                        "y[a] = x1 * c - x2 * s; y[a + n] = x2 * c + x1 * s"),
        Codelet("rope_backward", "R dy, R cos_t, R sin_t, W dx", "i64 m, i64 k, i64 n",
                "6*m*k*n",
                doc="dx1 = dy1·cos + dy2·sin, dx2 = dy2·cos − dy1·sin: the rotation's "
                    "transpose (dx may be dy).",
                formula="const int64_t a = (i * k + j) * 2 * n + l, t = j * n + l; "
                        "float d1 = dy[a], d2 = dy[a + n], c = cos_t[t], s = sin_t[t]; "
                        "dx[a] = d1 * c + d2 * s; dx[a + n] = d2 * c - d1 * s"),
    ),
    *family(
        "gemm",
        Codelet("gemm", "R a, R b, RW c",
                "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha, f32 beta",
                "2.0*batch*m*n*k", overwrite="beta == 0", opencl="host", cuda="cublas"),
    ),
    # float32 <-> bfloat16, round to nearest even (NaN stays NaN): kernels/formula.h
    *family(
        "bf16",
        Codelet("f32_to_bf16", "R x, W:bf16 y", "i64 n", "0",
                doc="y[i] = bf16(x[i]), rounded to nearest, ties to even.",
                formula="y = nl_bf16_round(x)"),
        Codelet("bf16_to_f32", "R:bf16 x, W y", "i64 n", "0", doc="y[i] = x[i] (exact).",
                formula="y = nl_bf16_widen(x)"),
        # GELU with bf16 storage (the bf16 precision modes' MLP): the forward writes the bf16
        # copy of its input and its bf16 output (no float32 activation tile), the backward
        # reads the bf16 input, widened in registers (no float32 copy of it)
        Codelet("gelu_bf16", "R x, W:bf16 xk, W:bf16 out", "i64 n", "15*n",
                doc="xk[i] = bf16(x[i]), out[i] = bf16(gelu(x[i])).",
                formula="xk = nl_bf16_round(x); out = nl_bf16_round(nl_gelu_value(x))"),
        Codelet("gelu_backward_bf16", "R:bf16 x, R dy, RW dx", "i64 n, f32 beta", "25*n",
                overwrite="beta == 0",
                doc="dx[i] = dy[i]·gelu'(x[i]) + β·dx[i], x in bf16 (β = 0 overwrites dx).",
                formula="float d = dy * nl_gelu_derivative(nl_bf16_widen(x)); "
                        "dx = overwrite ? d : d + beta * dx"),
        # SwiGLU's gate with bf16 storage (a Llama's MLP under the bf16 modes): the forward
        # writes the bf16 copies of both inputs (kept for the backward) and its output in
        # bf16 (the next GEMM's operand); the backward reads the bf16 inputs widened
        Codelet("silu_gate_bf16", "R g, R u, W:bf16 gk, W:bf16 uk, W:bf16 out", "i64 n", "7*n",
                exps="n",
                doc="gk[i] = bf16(g[i]), uk[i] = bf16(u[i]), out[i] = bf16(silu(g[i])·u[i]).",
                formula="float s, q; nl_sigmoid(g, &s, &q); gk = nl_bf16_round(g); "
                        "uk = nl_bf16_round(u); out = nl_bf16_round(g * s * u)"),
        Codelet("silu_gate_backward_bf16", "R:bf16 g, R:bf16 u, R dy, RW dg, RW du",
                "i64 n, f32 beta", "14*n", overwrite="beta == 0", exps="n",
                doc="silu_gate_backward with g and u in bf16 (widened in registers).",
                formula="float gv = nl_bf16_widen(g), uv = nl_bf16_widen(u), s, q; "
                        "nl_sigmoid(gv, &s, &q); float vg = dy * uv * (s * (1.0f + gv * q)); "
                        "float vu = dy * (gv * s); dg = overwrite ? vg : vg + beta * dg; "
                        "du = overwrite ? vu : vu + beta * du"),
    ),
    # gemm_bf16.c: gemm's product with bf16 a and b, fp32 accumulation and c (oneDNN)
    *family(
        "gemm",
        Codelet("gemm_bf16", "R:bf16 a, R:bf16 b, RW c",
                "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha, f32 beta",
                "2.0*batch*m*n*k", overwrite="beta == 0", cuda="cublas"),
    ),
    # gemm_c16.c: gemm's product (beta 0) stored in bf16, float32 sums rounded once: the
    # bf16 modes' logits; bf16 a and b (oneDNN writes the bf16 c) or float32 a and b (sgemm
    # into a scratch of the task's own); and bf16 a (widened in the task), float32 b and c:
    # bf16-storage's head backward
    *family(
        "gemm",
        Codelet("gemm_bf16_c16", "R:bf16 a, R:bf16 b, W:bf16 c",
                "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha",
                "2.0*batch*m*n*k", cuda="cublas"),
        Codelet("gemm_c16", "R a, R b, W:bf16 c",
                "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha",
                "2.0*batch*m*n*k"),
        Codelet("gemm_a16", "R:bf16 a, R b, RW c",
                "i64 batch, i64 m, i64 n, i64 k, i32 trans_a, i32 trans_b, f32 alpha, f32 beta",
                "2.0*batch*m*n*k", overwrite="beta == 0"),
    ),
    *family(
        "embedding",
        Codelet("embedding", "R:i64 ids, R table, RWC out",
                "i64 n, i64 e, i64 voff, i64 vrows, i64 vocab, i32 check", "0", opencl="host",
                cuda="kernel"),
        Codelet("embedding_backward", "R:i64 ids, R dout, RW dtable",
                "i64 n, i64 e, i64 voff, i64 vrows, i64 vocab, i32 check", "0", opencl="host",
                cuda="kernel"),
    ),
    *family(
        "loss",
        Codelet("cross_entropy_stats", "R x, R:i64 labels, W stats",
                "i64 n, i64 vt, i64 voff, i64 vocab", "4.0*n*vt", opencl="host", cuda="kernel"),
        Codelet("cross_entropy_merge", "RW stats, R part", "i64 n", "8*n", opencl="kernel",
                cuda="kernel"),
        Codelet("cross_entropy_loss", "R stats, RW loss", "i64 n, f32 scale, i32 first", "3*n",
                opencl="kernel", opencl_items="1", cuda="kernel"),
        Codelet("cross_entropy_backward", "R x, R:i64 labels, R stats, W dx",
                "i64 n, i64 vt, i64 voff, f32 scale", "3.0*n*vt",
                opencl="kernel", opencl_items="n*vt", cuda="kernel"),
    ),
    # loss_bf16.c: cross-entropy from bf16 logits, computed in float32, bf16 gradient
    *family(
        "loss",
        Codelet("cross_entropy_stats_bf16", "R:bf16 x, R:i64 labels, W stats",
                "i64 n, i64 vt, i64 voff, i64 vocab", "4.0*n*vt", cuda="kernel"),
        Codelet("cross_entropy_backward_bf16", "R:bf16 x, R:i64 labels, R stats, W:bf16 dx",
                "i64 n, i64 vt, i64 voff, f32 scale", "3.0*n*vt", cuda="kernel"),
    ),
    # optimizer steps on n parameters, in place, exactly as torch.optim computes them; the
    # Python side folds the step-dependent scalars in double precision (1 − β,
    # lr/(1 − β1^t), 1/√(1 − β2^t)): in float32 1 − 0.999 is off by 1e-5
    *family(
        "optim",
        # AdamW: decay = 1 − lr·wd, l2 = 0; Adam with L2 decay: decay = 1, l2 = wd
        Codelet("adamw", "RW p, R g, RW m, RW v",
                "i64 n, f32 beta1, f32 beta2, f32 one_m_beta1, f32 one_m_beta2, f32 step_size, "
                "f32 inv_bc2_sqrt, f32 eps, f32 decay, f32 l2, f32 grad_scale", "17*n",
                doc="g' = s·g + l2·p; m = β1·m + (1 − β1)·g'; v = β2·v + (1 − β2)·g'²; "
                    "p = decay·p − step_size·m / (√v·inv_bc2_sqrt + eps).",
                formula="float gi = grad_scale * g + l2 * p; "
                        "float mi = beta1 * m + one_m_beta1 * gi; "
                        "float vi = beta2 * v + one_m_beta2 * gi * gi; m = mi; v = vi; "
                        "p = decay * p - step_size * mi / (nl_sqrt(vi) * inv_bc2_sqrt + eps)"),
        Codelet("sgd", "RW p, R g", "i64 n, f32 lr, f32 wd, f32 grad_scale", "5*n",
                doc="p −= lr·(s·g + wd·p).", formula="p -= lr * (grad_scale * g + wd * p)"),
        Codelet("sgd_momentum", "RW p, R g, RW buf",
                "i64 n, f32 lr, f32 wd, f32 momentum, f32 one_m_dampening, i32 nesterov, "
                "i32 first, f32 grad_scale", "10*n",
                doc="d = s·g + wd·p; buf = first ? d : momentum·buf + (1 − dampening)·d; "
                    "p −= lr·(nesterov ? d + momentum·buf : buf).",
                formula="float d = grad_scale * g + wd * p; "
                        "float b = first ? d : momentum * buf + one_m_dampening * d; buf = b; "
                        "p -= lr * (nesterov ? d + momentum * b : b)"),
    ),
    # causal mask and axis permutation on one tile
    *family(
        "layout",
        Codelet("mask_causal", "RW x", "i64 batch, i64 m, i64 n, i64 row0, i64 col0, f32 value",
                "0", opencl="kernel", opencl_items="batch*m*n", cuda="kernel"),
        Codelet("permute", "R x, W y",
                "i64 n0, i64 n1, i64 n2, i64 n3, i64 n4, i64 n5, "
                "i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5", "0",
                opencl="kernel", opencl_items="n0*n1*n2*n3*n4*n5", cuda="kernel"),
    ),
]
