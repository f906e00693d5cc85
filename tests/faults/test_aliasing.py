"""Every op whose output may alias an input: it computes what it computes with a
separate output (same initial values), or refuses with a clear ValueError. A silent
wrong answer fails. Views alias too (a view shares its base's tiles)."""
import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab.ops._generated import OPS as ELEMENTWISE

N, T = 8, 4          # square (N, N) operands in (T, T) tiles: any two may alias


def arrays():
    rng = np.random.default_rng(70)
    a = {k: rng.standard_normal((N, N)).astype(np.float32) for k in ("a", "b", "c", "d")}
    a["f"] = rng.standard_normal(N).astype(np.float32)        # a fiber of axis 1
    a["f2"] = rng.standard_normal(N).astype(np.float32)
    a["v"] = np.abs(rng.standard_normal((N, N))).astype(np.float32)  # second moment ≥ 0
    a["ids"] = rng.integers(0, N, N).astype(np.int64)
    return a


def tensors(arr, tile):
    return {k: nl.from_numpy(v, (T, tile)[:v.ndim] if v.ndim == 2 else (tile,))
            for k, v in arr.items()}


def ln_stats(t):
    _, mean, inv_std = ops.layer_norm(t["b"], t["f"], t["f2"])
    return mean, inv_std


def rms_stats(t):
    return ops.rms_norm(t["b"], t["f"])[1]


def rope_tables(tile):
    cos, sin = ops.rope_tables(np.arange(N), N, 10000.0)
    return nl.from_numpy(cos, (tile, N // 2)), nl.from_numpy(sin, (tile, N // 2))


def elementwise_case(op):
    """The case of an op generated from the codelet table: its inputs are "a", "b", "d",
    its output "c", its scalars 0.5, 2.0, ... (an RW output is read: β ≠ 0); an output
    may be any input itself (one task per tile, each element read before it is written)."""
    keys = dict(zip(op.inputs, ("a", "b", "d")))
    scalars = dict(zip(op.scalars, (0.5, 2.0, -1.5)))
    fn = getattr(ops, op.name)

    def call(t):
        return fn(**{name: t[k] for name, k in keys.items()}, **{op.output: t["c"]}, **scalars)
    return call, [("c", k) for k in keys.values()], "same"


# name -> (call(t) -> result tensors, [(output key, input key)...], outcome)
# outcome "same": the aliased call gives the separate call's result; "refuse": ValueError.
CASES = {
    **{name: elementwise_case(op) for name, op in ELEMENTWISE.items()},
    "copy": (lambda t: ops.copy(t["a"], out=t["c"]), [("c", "a")], "same"),
    "gemm": (lambda t: ops.gemm(t["a"], t["b"], out=t["c"], beta=0.5),
             [("c", "a"), ("c", "b")], "refuse"),
    "gemm_trans": (lambda t: ops.gemm(t["a"], t["b"], out=t["c"], trans_a=True),
                   [("c", "a"), ("c", "b")], "refuse"),
    "permute": (lambda t: ops.permute(t["a"], (1, 0), out=t["c"]), [("c", "a")], "refuse"),
    # x is bfloat16 (a new tensor), dy and dx float32: only dx = dy can alias
    "gelu_backward_bf16": (lambda t: ops.gelu_backward_bf16(ops.to_bf16(t["a"]), t["b"],
                                                            dx=t["c"], beta=0.5),
                           [("c", "b")], "same"),
    "softmax": (lambda t: ops.softmax(t["a"], 1, out=t["c"]), [("c", "a")], "same"),
    "softmax_backward": (lambda t: ops.softmax_backward(t["d"], t["b"], 1, dx=t["c"]),
                         [("c", "b"), ("c", "d")], "same"),
    "layer_norm": (lambda t: ops.layer_norm(t["a"], t["f"], t["f2"], out=t["c"])[0],
                   [("c", "a")], "same"),
    "layer_norm_backward": (
        lambda t: ops.layer_norm_backward(t["b"], t["a"], t["f"], *ln_stats(t), dx=t["c"],
                                          dgamma=t["f2"]),
        [("c", "a"), ("c", "b"), ("f2", "f")], "refuse"),
    "rms_norm": (lambda t: ops.rms_norm(t["a"], t["f"], out=t["c"])[0], [("c", "a")], "same"),
    "rms_norm_backward": (
        lambda t: ops.rms_norm_backward(t["b"], t["a"], t["f"], rms_stats(t), dx=t["c"],
                                        dweight=t["f2"]),
        [("c", "a"), ("c", "b"), ("f2", "f")], "refuse"),
    # a head (the last axis) whole in each tile: the _1tile layout only
    "rope_1tile": (lambda t: ops.rope(t["a"], *rope_tables(T), out=t["c"]), [("c", "a")],
                   "same"),
    "rope_backward_1tile": (lambda t: ops.rope_backward(t["a"], *rope_tables(T), dx=t["c"]),
                            [("c", "a")], "same"),
    # dg and du over any of the inputs (each value read before it is written)
    "silu_gate_backward": (
        lambda t: ops.silu_gate_backward(t["a"], t["b"], t["d"], dg=t["c"], du=t["v"],
                                         beta=0.5),
        [("c", "a"), ("c", "b"), ("c", "d"), ("v", "a"), ("v", "b"), ("v", "d")], "same"),
    # g and u bfloat16 (new tensors), dy, dg and du float32: only dg, du = dy can alias
    "silu_gate_backward_bf16": (
        lambda t: ops.silu_gate_backward_bf16(ops.to_bf16(t["a"]), ops.to_bf16(t["b"]),
                                              t["d"], dg=t["c"], du=t["v"], beta=0.5),
        [("c", "d"), ("v", "d")], "same"),
    "embedding": (lambda t: ops.embedding(t["ids"], t["a"], out=t["c"]), [("c", "a")],
                  "refuse"),
    "embedding_backward": (lambda t: ops.embedding_backward(t["ids"], t["a"], t["c"]),
                           [("c", "a")], "refuse"),
    "adamw": (lambda t: (ops.adamw(t["a"], t["b"], t["c"], t["v"], step=2, lr=0.1,
                                   weight_decay=0.1), t["a"], t["c"], t["v"])[1:],
              [("a", "b"), ("c", "b"), ("v", "c"), ("a", "v")], "refuse"),
    "sgd": (lambda t: (ops.sgd(t["a"], t["b"], t["c"], lr=0.1, momentum=0.9),
                       t["a"], t["c"])[1:], [("a", "b"), ("c", "a")], "refuse"),
}


# the ops with a kernel of their own when the axis is one tile: again with whole rows
for _name in ("softmax", "softmax_backward", "layer_norm", "layer_norm_backward", "rms_norm",
              "rms_norm_backward"):
    CASES[_name + "_1tile"] = CASES[_name]


def run(case, arr, alias):
    """The case's results with operand ``alias[0]`` replaced by ``alias[1]``'s tensor
    (None: a separate tensor holding alias[1]'s values)."""
    call, _, _ = CASES[case]
    t = tensors(arr, N if case.endswith("_1tile") else T)
    if alias is not None:
        t[alias[0]] = t[alias[1]]
    out = call(t)
    return [r.to_numpy() for r in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case,pair", [(c, p) for c, (_, pairs, _) in CASES.items()
                                       for p in pairs])
def test_aliased_output_is_right_or_refused(rt1, case, pair):
    arr = arrays()
    separate = dict(arr)
    separate[pair[0]] = arr[pair[1]].copy()   # same values, own tiles
    want = run(case, separate, None)
    if CASES[case][2] == "refuse":
        op = case.split("_trans")[0].split("_1tile")[0]
        with pytest.raises(ValueError, match=rf"^{op}: \w+ is \w+ \(TiledTensor.*still reads: "
                                             r"pass a separate"):
            run(case, arr, pair)
        return
    got = run(case, arr, pair)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_views_alias_their_base(rt1):
    """A view shares its base's tiles: an output that is a view of an input is caught."""
    rng = np.random.default_rng(71)
    x = nl.from_numpy(rng.standard_normal((N, 1)).astype(np.float32), (T, 1))
    flat = x.merge_axes(0)                       # (N,), tiles (T,): x's slice along axis 1
    with pytest.raises(ValueError, match=r"sum_slice: out shares its tiles with x"):
        ops.sum_slice(x, 1, out=flat)
    with pytest.raises(ValueError, match=r"add_slice: x shares its tiles with s"):
        ops.add_slice(flat, x, 1)
    with pytest.raises(ValueError, match=r"max_slice: out shares its tiles with x"):
        ops.max_slice(x, 1, out=flat)
    with pytest.raises(ValueError, match=r"sumsq_slice: out shares its tiles with x"):
        ops.sumsq_slice(x, 1, out=flat)
    with pytest.raises(ValueError, match=r"mul_slice: x shares its tiles with s"):
        ops.mul_slice(flat, x, 1)
    # the same (N,) view is also the fiber of x along axis 0
    with pytest.raises(ValueError, match=r"sum_fiber: out shares its tiles with x"):
        ops.sum_fiber(x, 0, out=flat)
    with pytest.raises(ValueError, match=r"add_fiber: x shares its tiles with f"):
        ops.add_fiber(flat, x, 0)
    with pytest.raises(ValueError, match=r"mul_fiber: x shares its tiles with f"):
        ops.mul_fiber(flat, x, 0)
    with pytest.raises(ValueError, match=r"sumprod_slice: out shares its tiles with a"):
        ops.sumprod_slice(x, x, 1, out=flat)
    one = nl.zeros((1, 1))
    with pytest.raises(ValueError, match=r"sumsq_all: out shares its tiles with x"):
        ops.sumsq_all(one, out=one.merge_axes(0))
    sq = nl.from_numpy(rng.standard_normal((N, N)).astype(np.float32), (T, T))
    with pytest.raises(ValueError, match=r"gemm: out shares its tiles with a"):
        ops.gemm(sq.split_axis(1, T).merge_axes(1), sq, out=sq)


# ops with no output that could alias an input: fill and mask_causal only write in place,
# cross_entropy makes its outputs, axpy is add
NO_OUTPUT_ARGUMENT = {"fill", "mask_causal", "cross_entropy", "axpy", "gelu_bf16",
                      "silu_gate_bf16", "rope_tables"}
# ops whose output has another dtype than their input (float32 <-> bfloat16): a tensor and
# its views share one dtype, so the output can never share the input's tiles
DTYPE_CHANGING = {"to_bf16", "to_f32"}
# ops whose operands no two square tensors can be (a 4-D KV cache beside (B, t, E) blocks):
# their aliasing is checked in their own file (tests/ops/test_decode.py)
TESTED_ELSEWHERE = {"kv_write", "attend", "take_position"}
VIEW_CASES = {"sum_slice", "add_slice", "max_slice", "sumprod_slice", "sumsq_all",
              "sumsq_slice", "mul_slice", "sum_fiber", "add_fiber", "mul_fiber"}


def test_every_op_is_covered():
    """A new op must join a list above (and so be checked for aliasing); the ops generated
    from the codelet table join by themselves."""
    covered = {c.split("_trans")[0].split("_1tile")[0] for c in CASES} | VIEW_CASES
    assert set(ops.__all__) - {"SubmitError"} == (covered | NO_OUTPUT_ARGUMENT | DTYPE_CHANGING
                                                    | TESTED_ELSEWHERE)
