"""Compare two builds of the C kernels bit for bit: every row of the codelet table that both
builds have, called directly (``nl_call_op``, no StarPU) on the same inputs, in both.

    .venv/bin/python scripts/kernel_outputs.py BEFORE_EXT_DIR [AFTER_EXT_DIR]

Each EXT_DIR holds a build's ``v3.abi3.so`` / ``v4.abi3.so`` (``nntile_lab/_ext``; AFTER
defaults to this checkout's). Keep a copy of ``nntile_lab/_ext`` before changing kernels/,
rebuild, then run this: it prints one line per op and variant and exits 1 if any output
differs in any bit — but for the sign or payload of a NaN, which IEEE 754 leaves
unspecified and x86 takes from whichever NaN operand the compiler put first (those are
counted apart).

Inputs: the kernel benchmark's cases (``nntile_lab.bench.kernels.cases``) at small tiles,
each axis case also with the axis in the middle (n > 1), floats drawn from a seeded
generator with special values mixed in (±0, ±inf, NaN, subnormals, ±1e30, values where
exp overflows or underflows; a set without the non-finite ones too, so that reductions
give finite results); outputs of a ``beta == 0`` call start as NaN (they must be
overwritten unread), of other calls as data. Every op runs with its scalars as the case
has them and again with alpha/beta-like scalars changed, so that both sides of an
``overwrite`` condition run.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nntile_lab import cpu_variant  # noqa: E402 (pure Python: loads no build)

DIMS = [dict(tokens=24, embd=70, inner=36, vocab_tile=29, vocab=50, batch_tile=2, seq=12,
             heads=3, head_size=5),
        dict(tokens=16, embd=131, inner=200, vocab_tile=67, vocab=67, batch_tile=2, seq=8,
             heads=2, head_size=8)]
FIBERS = {"f", "gamma", "bias", "dgamma", "dbias", "w", "dw"}
SLICES = {"s", "mx", "mean", "inv_std", "inv_rms"}
# mixed into the inputs: finite ones (every output stays meaningful), then also the
# non-finite ones and overflowing ones (a reduction over them is mostly inf or NaN)
FINITE = np.float32([0.0, -0.0, 1e-40, -1e-40, 1e-45, 88.5, -88.5, -104.0, 200.0, -200.0])
SPECIAL = np.concatenate([FINITE, np.float32([np.inf, -np.inf, np.nan, 1e30, -1e30, 3.0e38,
                                              -3.0e38])])
# scalars that scale an old value or the result: changed in the second call of each op
VARIED = {"alpha": -1.3, "beta": 0.7, "beta_gamma": 0.6, "beta_bias": -0.4, "scale": 0.25,
          "accumulate": 1, "first": 0, "nesterov": 1, "value": -2.5, "l2": 0.01,
          "decay": 0.999, "finish": 0}


def load(ext_dir: str, variant: str):
    """The extension module of ``variant`` in ``ext_dir``, installed as the package's own
    before anything imports it (one build per process: Python loads an extension module of
    a given name once)."""
    import scipy_openblas32  # the BLAS the kernels call, loaded globally first (_lib.py)
    ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(),
                             f"lib{scipy_openblas32.get_library()}.so"), mode=ctypes.RTLD_GLOBAL)
    path = os.path.join(ext_dir, f"{variant}.abi3.so")
    name = f"nntile_lab._ext.{variant}"
    import nntile_lab._ext
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name] = mod
    setattr(nntile_lab._ext, variant, mod)
    os.environ["NNTILE_LAB_CPU_VARIANT"] = variant
    return mod


def table(mod) -> dict:
    ffi, lib = mod.ffi, mod.lib
    rows = {}
    for i in range(lib.nl_op_count()):
        buffers, args, _ = ffi.string(lib.nl_op_signature(i)).decode().split("|")
        bufs = []
        for item in buffers.split(","):
            mode, name = item.split()
            mode, _, dtype = mode.partition(":")
            bufs.append((mode, dtype or "f32", name))
        rows[ffi.string(lib.nl_op_name(i)).decode()] = {
            "op": i, "buffers": bufs, "args": [a.split()[1] for a in args.split(",")]}
    return rows


def axis_variant(case, m=3, k=5, n=4):
    """the case with the axis in the middle of an (m, k, n) tile (n > 1)"""
    from nntile_lab.bench.kernels import Case  # after load(): it imports the extension
    old_m = case.args["m"]
    if case.name.startswith("rope"):   # (m, k, 2n) heads, (k, n) tables
        sizes = {name: k * n if name.endswith("_t") else 2 * m * k * n for name in case.sizes}
        return Case(case.name, dict(case.args, m=m, k=k, n=n), sizes, case.init)
    sizes = {name: (k if name in FIBERS else m * n if name in SLICES
                    else size // old_m * m * n if name == "sums" else m * k * n)
             for name, size in case.sizes.items()}
    return Case(case.name, dict(case.args, m=m, k=k, n=n), sizes, case.init)


def inputs(case, row: dict, seed: int, zero_outputs_nan: bool,
           special: np.ndarray) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for mode, dtype, name in row["buffers"]:
        n = case.sizes[name]
        if name in case.init:
            arr = np.ascontiguousarray(case.init[name](n))
        elif dtype == "i64":
            arr = np.zeros(n, np.int64)
        else:
            arr = (rng.standard_normal(n) * rng.choice([0.5, 3.0, 30.0], n)).astype(np.float32)
            if name not in case.init and mode == "R" and n > 4:
                pick = rng.random(n) < 0.15
                arr[pick] = rng.choice(special, pick.sum())
        if dtype == "bf16":
            arr = (arr.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        elif dtype == "i64":
            arr = arr.astype(np.int64)
        else:
            arr = arr.astype(np.float32)
        if (mode == "W" or (mode.startswith("RW") and zero_outputs_nan)) and dtype == "f32":
            arr[:] = np.nan
        out.append(arr)
    return out


def run(mod, row: dict, args: dict, bufs: list[np.ndarray]) -> list[np.ndarray]:
    ffi, lib = mod.ffi, mod.lib
    bufs = [b.copy() for b in bufs]
    ptrs = ffi.new("void *[]", [ffi.cast("void *", b.ctypes.data) for b in bufs])
    vals = ffi.new("double[]", [float(args[a]) for a in row["args"]])
    if lib.nl_call_op(row["op"], ptrs, vals) != 0:
        raise RuntimeError(f"nl_call_op refused {row}")
    msg = ffi.new("char[]", 512)
    lib.nl_take_error(msg, 512)   # a kernel's error (bad data) is part of neither output
    return bufs


def calls():
    """(label, case) for every case, at both sizes, with the axis variants."""
    from nntile_lab.bench.kernels import cases  # after load(): it imports the extension
    for d, dims in enumerate(DIMS):
        for case in cases(dims):
            yield f"{case.name}@{d}", case
            if {"m", "k", "n"} <= case.args.keys():
                yield f"{case.name}@{d}-n4", axis_variant(case)


def dump(ext_dir: str, variant: str, out: str) -> None:
    """Every call's outputs with the build in ext_dir, into the .npz file out."""
    mod = load(ext_dir, variant)
    rows = table(mod)
    res = {}
    for label, case in calls():
        row = rows.get(case.name)
        if row is None:
            continue
        sig = repr((row["buffers"], row["args"]))
        res[f"{label}|sig"] = np.frombuffer(sig.encode(), np.uint8)
        varied = dict(case.args, **{k: v for k, v in VARIED.items() if k in case.args})
        for j, (args, special) in enumerate([(case.args, FINITE), (varied, FINITE),
                                             (case.args, SPECIAL), (varied, SPECIAL)]):
            zero = any(args.get(k) == 0 for k in ("beta", "beta_gamma", "beta_bias"))
            bufs = inputs(case, row, zlib.crc32(label.encode()) + j, zero, special)
            for (mode, _, name), x in zip(row["buffers"], run(mod, row, args, bufs)):
                if mode != "R":
                    res[f"{label}|{j}|{name}"] = x.view(np.uint8)
    np.savez(out, **res)


def _nan_canonical(raw: np.ndarray) -> bytes:
    """float32 bytes with every NaN made the one quiet NaN 0x7fc00000: IEEE 754 leaves the
    sign and payload of a NaN result unspecified, and x86 returns the first operand's NaN,
    an order the compiler chooses (a + b and b + a are the same value)"""
    u = raw.view(np.uint32).copy()
    u[np.isnan(u.view(np.float32))] = 0x7FC00000
    return u.tobytes()


def compare(before: str, after: str, variant: str) -> int:
    """Dump both builds' outputs (a process each) and count the outputs that differ."""
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for which, ext in (("before", before), ("after", after)):
            out = os.path.join(tmp, f"{which}.npz")
            subprocess.run([sys.executable, __file__, "--dump", ext, variant, out], check=True)
            outs.append(np.load(out))
        a, b = outs
        bad = checked = nan_sign = 0
        for key in sorted(set(a.files) & set(b.files)):
            checked += not key.endswith("|sig")
            x, y = a[key], b[key]
            if x.tobytes() == y.tobytes():
                continue
            if not key.endswith("|sig") and x.size == y.size and x.size % 4 == 0 \
                    and _nan_canonical(x) == _nan_canonical(y):
                nan_sign += 1   # the same values: only a NaN's sign or payload differs
                print(f"{variant} {key}: only the sign or payload of a NaN differs")
                continue
            what = "signature changed" if key.endswith("|sig") else (
                f"{int((x != y).sum())} bytes differ")
            print(f"{variant} {key}: {what}")
            bad += 1
    print(f"{variant}: {checked} outputs compared, {bad} differ"
          + (f" ({nan_sign} more with a NaN of another sign or payload)" if nan_sign else ""))
    return bad


def main(argv):
    if argv[:1] == ["--dump"]:
        dump(*argv[1:4])
        return 0
    if not 1 <= len(argv) <= 2:
        print(__doc__)
        return 2
    before = argv[0]
    after = argv[1] if len(argv) > 1 else os.path.join(ROOT, "nntile_lab", "_ext")
    flags = cpu_variant.cpu_flags()
    variants = [v for v in cpu_variant.X86_64 if cpu_variant.runs_on(v, flags)
                and os.path.exists(os.path.join(before, f"{v}.abi3.so"))]
    bad = sum(compare(before, after, v) for v in variants)
    print("bit for bit equal" if not bad else f"{bad} outputs differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
