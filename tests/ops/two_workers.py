"""One computation on the CPU worker and on an accelerator worker (OpenCL or CUDA), for the
tests that compare the two: test_opencl.py and test_cuda.py."""
import numpy as np

import nntile_lab as nl
from nntile_lab._lib import lib
from tests.conftest import cond_err
from tests.strategies import gemm_layouts, gemm_reference


def handles(t):
    return [t.handles[i] for i in range(t.ntiles)]


def memory_node(rt, kind: str) -> int:
    return rt.opencl_memory_node() if kind == "opencl" else rt.cuda_memory_node()


def on_cpu_and(kind: str, rt, arrays, tiles, run):
    """``run(tensors)`` (tensors from ``arrays``, tiled by ``tiles[name]``) on the CPU and on
    the ``kind`` worker: the tensors it returns, as numpy, for each. What ran on the
    accelerator left its outputs in the accelerator's memory (nothing else would bring them
    there; StarPU may also have written them back to RAM while idle)."""
    out = {}
    for where in ("cpu", kind):
        tensors = {k: nl.from_numpy(v, tiles[k]) for k, v in arrays.items()}
        with rt.on(where):
            got = run(tensors)
            rt.wait()
        if where == kind:
            node = memory_node(rt, kind)
            assert all(lib.starpu_data_is_on_node(h, node) for t in got for h in handles(t))
        out[where] = [t.to_numpy() for t in got]
    return out["cpu"], out[kind]


def optimizer_runs(shape, tiles, step: int, flag: bool, plain_sgd: bool = False):
    """AdamW (fresh moments: first read on the worker as zeros, the init codelet) and SGD
    with momentum, ``flag`` choosing decoupled weight decay and Nesterov; ``plain_sgd`` adds
    an SGD step without a momentum buffer. Each returns the tensors it wrote."""
    def adamw(t):
        m, v = nl.tensor.empty(shape, tiles), nl.tensor.empty(shape, tiles)
        nl.ops.adamw(t["p"], t["g"], m, v, step=step, lr=1e-2, weight_decay=0.1,
                     decoupled=flag, grad_scale=0.5)
        return [t["p"], m, v]

    def sgd(t):
        nl.ops.sgd(t["p"], t["g"], t["buf"], lr=0.1, momentum=0.9, weight_decay=0.01,
                   nesterov=flag, first=step == 1)
        if plain_sgd:
            nl.ops.sgd(t["p"], t["g"], None, lr=0.05)
        return [t["p"], t["buf"]]

    return adamw, sgd


def optimizer_arrays(rng, shape) -> dict:
    return {k: rng.standard_normal(shape).astype(np.float32) for k in ("p", "g", "buf")}


def gemm_error_on(kind: str, rt, rng, case, alpha: float, beta: float) -> float:
    """A ``gemm_case`` on the ``kind`` worker against the float64 reference: ``cond_err``.
    With β = 0, C starts full of NaN and must come out overwritten (BLAS's rule)."""
    dims, _, ta, tb = case
    (a_shape, a_tiles), (b_shape, b_tiles), (c_shape, c_tiles) = gemm_layouts(case)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    c0 = (rng.standard_normal(c_shape).astype(np.float32) if beta
          else np.full(c_shape, np.nan, np.float32))
    want, magnitude = gemm_reference(case, a, b, c0, alpha, beta)
    ta_, tb_, tc = (nl.from_numpy(x, t) for x, t in ((a, a_tiles), (b, b_tiles), (c0, c_tiles)))
    with rt.on(kind):
        got = nl.ops.gemm(ta_, tb_, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta, out=tc,
                          ndim=len(dims["k"]), batch_ndim=len(dims["b"]))
        rt.wait()
    return cond_err(got.to_numpy(), want, magnitude)
