"""The element-wise ops generated from the codelet table: the module the build wrote is the
table's, each op is documented by its row, refuses bad operands with a clear error before
any task, and the generator refuses a row it cannot turn into an op, naming it."""
import dataclasses
import importlib.util
import inspect
import pathlib
import sys

import numpy as np
import pytest

import nntile_lab as nl
from nntile_lab import ops
from nntile_lab.ops import _generated
from nntile_lab.ops._generated import OPS

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _codegen():
    sys.path.insert(0, str(ROOT / "kernels"))
    try:
        spec = importlib.util.spec_from_file_location("codegen", ROOT / "kernels" / "codegen.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "kernels"))


def test_the_built_module_is_the_tables():
    """A row added or changed since the last build: rebuild (pip install -e .)."""
    assert pathlib.Path(_generated.__file__).read_text() == _codegen().generate_python(), \
        "nntile_lab/ops/_generated.py is stale: rebuild with pip install -e ."


def test_every_py_row_is_a_documented_public_op():
    rows = {r.name: r for r in _codegen().CODELETS if r.py}
    assert sorted(op.row for op in OPS.values()) == sorted(rows)
    for name, op in OPS.items():
        fn, row = getattr(ops, name), rows[op.row]
        assert name in ops.__all__ and fn is getattr(_generated, name)
        assert fn.__doc__.startswith(row.doc + "\n"), name
        params = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                  for p in inspect.signature(fn).parameters.values()]
        assert f"{name}({', '.join(params)})" == row.py


@pytest.mark.parametrize("name", sorted(OPS))
def test_refuses_int64_and_mismatched_tiles_before_any_task(rt1, name):
    op = OPS[name]
    fn = getattr(ops, name)
    args = {s: 0.5 for s in op.scalars}
    f32 = {t: nl.zeros((6, 4), (3, 4)) for t in (*op.inputs, op.output)}
    for bad in (*op.inputs, op.output):
        tensors = dict(f32, **{bad: nl.from_numpy(np.zeros((6, 4), np.int64), (3, 4))})
        with pytest.raises(TypeError, match=rf"^{name}: {bad} must be float32, got int64$"):
            fn(**tensors, **args)
    other = dict(f32, **{op.output: nl.zeros((6, 4), (2, 4))})
    with pytest.raises(ValueError, match=rf"^{name}(: {op.output})?: shapes/tiles differ: "
                                         r".*; element-wise ops need equal shapes and equal "
                                         r"tile shapes$"):
        fn(**other, **args)
    # nothing was submitted: the outputs are still all zeros
    for t in f32.values():
        assert not t.to_numpy().any()


BAD_ROWS = [
    (dict(py="relu(x)"), r"parameters must be the buffers.*out, x"),
    (dict(py="relu(x, out)"), r"the W output out needs the default None"),
    (dict(py="relu(x, out=None, alpha=1.0)"), r"parameters must be the buffers"),
    (dict(py="relu x"), r"is not a signature like"),
    (dict(buffers="R x, W out, W out2"), r"writes exactly one buffer"),
    (dict(buffers="R:i64 x, W out"), r"buffers are float32"),
    (dict(args="i64 m"), r"first argument is 'i64 n'"),
    (dict(py="relu(x=None, out=None)"), r"only the output may have a default"),
    (dict(py="relu(x, out=x)"), r"the W output out needs the default None"),
    (dict(doc=""), r"give its formula as doc="),
    (dict(width="mlp"), r"width='mlp' is neither 'embd' nor 'inner'"),
]


@pytest.mark.parametrize("change,message", BAD_ROWS)
def test_generator_refuses_a_bad_row_naming_it(change, message):
    cg = _codegen()
    good = next(r for r in cg.CODELETS if r.name == "relu")
    cg.CODELETS = [dataclasses.replace(good, name="bad_op", **change)]   # this module's only
    with pytest.raises(cg.TableError, match=rf"^codelet bad_op\b.*{message}"):
        cg.generate_python()
