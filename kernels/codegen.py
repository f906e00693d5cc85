"""Generate the StarPU glue for every row of the codelet table (see codelets.py), and the
Python tile loops of its element-wise rows."""
import glob
import os
import re
import textwrap

import formulas
from codelets import CODELETS
from formulas import TableError

C_TYPES = {"i64": "int64_t", "i32": "int32_t", "f32": "float"}
# bf16 tiles hold the upper 16 bits of an IEEE float32 (kernels/cpu/bf16.c)
BUF_TYPES = {"f32": "float", "i64": "int64_t", "bf16": "uint16_t"}
MODES = {"R": "STARPU_R", "W": "STARPU_W", "RW": "STARPU_RW",
         "RWC": "STARPU_RW | STARPU_COMMUTE"}


def _buffers(row):
    for i, item in enumerate(row.buffers.split(",")):
        mode, name = item.split()
        mode, _, dtype = mode.partition(":")
        yield i, MODES[mode], BUF_TYPES[dtype or "f32"], name, mode == "R"


def _args(row):
    for item in row.args.split(","):
        typ, name = item.split()
        yield C_TYPES[typ], name


def _submit_params(row):
    handles = [f"starpu_data_handle_t {name}" for _, _, _, name, _ in _buffers(row)]
    return ", ".join(handles + [f"{typ} {name}" for typ, name in _args(row)])


def kernel_prototype(row):
    params = [f"{typ} {name}" for typ, name in _args(row)]
    params += [f"{'const ' if ro else ''}{typ} *{name}"
               for _, _, typ, name, ro in _buffers(row)]
    return f"void nl_{row.name}({', '.join(params)});"


def submit_prototype(row):
    return f"int nl_submit_{row.name}({_submit_params(row)});"


OPENCL_KINDS = ("kernel", "axis", "host")


def _opencl_funcs(row):
    """The codelet's OpenCL function, for a row that has one (only in a build with OpenCL:
    NL_HAVE_OPENCL)."""
    if not row.opencl:
        return ""
    return (f"\n#ifdef NL_HAVE_OPENCL\n    .opencl_funcs = {{nl_opencl_{row.name}}},\n"
            "#endif\n   ")


def _opencl_wrapper(row):
    """The OpenCL function of a row: its tiles as cl_mem in the device's memory, then
    either kernel nl_<name> of kernels/opencl/*.cl (the row's scalar arguments, then its
    buffers, as the C kernel takes them) over opencl_items work items (opencl="kernel") or
    as an axis launch over opencl_axis (opencl="axis": reductions along an axis), or the
    host function nl_ocl_<name> (opencl="host": e.g. CLBlast's GEMM, same parameters)."""
    if not row.opencl:
        return ""
    if row.opencl not in OPENCL_KINDS:
        raise TableError(f"codelet {row.name}: opencl={row.opencl!r} is not one of "
                         f"{OPENCL_KINDS}")
    n, bufs, args = row.name, list(_buffers(row)), list(_args(row))
    # tiles are registered whole (kernels/runtime/tiles.c): a sub-buffer offset would mean
    # a partitioned tile, which the kernels do not take
    mems = "".join(
        f"    cl_mem {name} = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[{i}]);\n"
        f"    if (STARPU_VECTOR_GET_OFFSET(buffers[{i}])) {{\n"
        f'        nl_error("{n} on OpenCL: tile {name} is a sub-buffer (offset %zu)",\n'
        f"                 (size_t)STARPU_VECTOR_GET_OFFSET(buffers[{i}]));\n"
        "        return;\n    }\n" for i, _, _, name, _ in bufs)
    if row.opencl == "host":
        params = [f"packed->{a}" for _, a in args] + [b for _, _, _, b, _ in bufs]
        call = f"    nl_ocl_{n}({', '.join(params)});\n"
    else:
        names = {a for _, a in args}
        launch = row.opencl_axis if row.opencl == "axis" else row.opencl_items
        field = "opencl_axis" if row.opencl == "axis" else "opencl_items"
        used = set(re.findall(r"[A-Za-z_]\w*", launch))
        if not used <= names:
            raise TableError(f"codelet {n}: {field}={launch!r} uses "
                             f"{', '.join(sorted(used - names))}, not arguments of the row")
        dims = _split_top(launch)
        if len(dims) != (3 if row.opencl == "axis" else 1):
            raise TableError(f"codelet {n}: {field}={launch!r} is not "
                             + ("three C expressions 'm, k, n'" if row.opencl == "axis"
                                else "one C expression"))
        dims = ", ".join(f"(int64_t)({_packed(d)})" for d in dims)
        values = [f"&packed->{a}" for _, a in args] + [f"&{b}" for _, _, _, b, _ in bufs]
        sizes = [f"sizeof packed->{a}" for _, a in args] + ["sizeof(cl_mem)"] * len(bufs)
        func = "nl_ocl_launch_axis" if row.opencl == "axis" else "nl_ocl_launch"
        call = (f"    const void *const values[] = {{{', '.join(values)}}};\n"
                f"    const size_t sizes[] = {{{', '.join(sizes)}}};\n"
                f'    {func}("nl_{n}", {dims}, {len(values)}, sizes, values);\n')
    return (f"#ifdef NL_HAVE_OPENCL\nstatic void nl_opencl_{n}(void *buffers[], void *cl_arg)\n"
            f"{{\n    const struct nl_args_{n} *packed = cl_arg;\n{mems}{call}}}\n#endif\n")


CUDA_KINDS = ("kernel", "cublas")


def _cuda_funcs(row):
    """The codelet's CUDA function, for a row that has one (only against a StarPU built with
    CUDA: STARPU_USE_CUDA). Asynchronous: the host function queues its kernels on the
    worker's stream and StarPU waits for the stream, overlapping it with transfers."""
    if not row.cuda:
        return ""
    return (f"\n#ifdef STARPU_USE_CUDA\n    .cuda_funcs = {{nl_cuda_{row.name}}}, "
            ".cuda_flags = {STARPU_CUDA_ASYNC},\n#endif\n   ")


def _cuda_params(row):
    """The parameters of host function nl_cu_<name> (kernels/cuda/): the worker's stream
    (cuda="kernel") or cuBLAS handle (cuda="cublas"), then the C kernel's own."""
    if row.cuda not in CUDA_KINDS:
        raise TableError(f"codelet {row.name}: cuda={row.cuda!r} is not one of {CUDA_KINDS}")
    first = "cublasHandle_t handle" if row.cuda == "cublas" else "cudaStream_t stream"
    params = [f"{typ} {name}" for typ, name in _args(row)]
    params += [f"{'const ' if ro else ''}{typ} *{name}" for _, _, typ, name, ro in _buffers(row)]
    return ", ".join([first] + params)


def cuda_prototype(row):
    """nl_cu_<name>: NULL when its work is queued, else what failed (a CUDA or cuBLAS error
    string, or bad data such as a token id outside the vocabulary)."""
    return f"const char *nl_cu_{row.name}({_cuda_params(row)});"


def _cuda_wrapper(row):
    """The CUDA function of a row: its tiles' device pointers, then nl_cu_<name> with the
    worker's stream (or cuBLAS handle, bound by StarPU to that stream)."""
    if not row.cuda:
        return ""
    _cuda_params(row)   # checks the kind
    n = row.name
    first = ("starpu_cublas_get_local_handle()" if row.cuda == "cublas"
             else "starpu_cuda_get_local_stream()")
    params = [first] + [f"packed->{a}" for _, a in _args(row)]
    params += [f"({typ} *)STARPU_VECTOR_GET_PTR(buffers[{i}])"
               for i, _, typ, _, _ in _buffers(row)]
    return (f"#ifdef STARPU_USE_CUDA\nstatic void nl_cuda_{n}(void *buffers[], void *cl_arg)\n"
            f"{{\n    const struct nl_args_{n} *packed = cl_arg;\n"
            f"    const char *err = nl_cu_{n}({', '.join(params)});\n"
            f'    if (err) nl_error("{n} on CUDA: %s", err);\n}}\n#endif\n')


def _packed(expr):
    """a C expression of the row's arguments, read from the task's packed arguments"""
    return re.sub(r"[A-Za-z_]\w*", lambda w: f"packed->{w.group(0)}", expr)


def _split_top(expr):
    """expr split at its top-level commas (not those inside parentheses), stripped"""
    parts, depth, cur = [], 0, ""
    for ch in expr:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()]


def _glue(op_id, row):
    n = row.name
    fields = "".join(f"    {typ} {name};\n" for typ, name in _args(row))
    unpack = [f"packed->{name}" for _, name in _args(row)]
    unpack += [f"({typ} *)STARPU_VECTOR_GET_PTR(buffers[{i}])"
               for i, _, typ, _, _ in _buffers(row)]
    modes = ", ".join(mode for _, mode, _, _, _ in _buffers(row))
    nbuf = len(list(_buffers(row)))
    set_handles = "".join(f"    t->handles[{i}] = {name};\n"
                          for i, _, _, name, _ in _buffers(row))
    set_args = "".join(f"    packed->{name} = {name};\n" for _, name in _args(row))
    # StarPU-MPI: the same buffers as (mode, handle) pairs for starpu_mpi_task_build and
    # post_build (variadic: called here in C, never from Python)
    mpi_args = "".join(f"{mode}, {name}, " for _, mode, _, name, _ in _buffers(row)) + "0"
    # an output written in place of an input (``out=x``): StarPU 1.3 then takes the tile
    # in W mode alone and, out of core, does not read the evicted input back (the task
    # saw zeros): such a task uses a twin codelet whose W buffers are RW
    bufs = list(_buffers(row))
    pairs = [(w, r) for _, wm, _, w, _ in bufs if wm == "STARPU_W"
             for _, rm, _, r, _ in bufs if rm == "STARPU_R"]
    rw_modes = ", ".join("STARPU_RW" if m == "STARPU_W" else m for _, m, _, _, _ in bufs)
    ocl = _opencl_funcs(row) + _cuda_funcs(row)
    twin = (f"""static struct starpu_codelet nl_cl_{n}_rw = {{
    .cpu_funcs = {{nl_cpu_{n}}}, .cpu_funcs_name = {{"nl_cpu_{n}"}},{ocl}
    .nbuffers = {nbuf}, .modes = {{{rw_modes}}}, .model = &nl_model_{n}, .name = "{n}"}};
""" if pairs else "")
    pick = (f"({' || '.join(f'{w} == {r}' for w, r in pairs)}) ? &nl_cl_{n}_rw : &nl_cl_{n}"
            if pairs else f"&nl_cl_{n}")
    # ``overwrite`` true (beta == 0): a twin whose RW tiles are W — StarPU would otherwise
    # zero-fill a fresh tile before the task (a cost BENCHMARKS.md records) or read an
    # evicted one back, to have it overwritten unread.
    # Not when an RW tile is also an input (then the kernel reads it).
    if row.overwrite:
        w_modes = ", ".join("STARPU_W" if m == "STARPU_RW" else m for _, m, _, _, _ in bufs)
        aliased = [(w, r) for _, wm, _, w, _ in bufs if wm == "STARPU_RW"
                   for _, rm, _, r, _ in bufs if rm == "STARPU_R"]
        alias_free = " && ".join(f"{w} != {r}" for w, r in aliased) or "1"
        twin += f"""static struct starpu_codelet nl_cl_{n}_w = {{
    .cpu_funcs = {{nl_cpu_{n}}}, .cpu_funcs_name = {{"nl_cpu_{n}"}},{ocl}
    .nbuffers = {nbuf}, .modes = {{{w_modes}}}, .model = &nl_model_{n}, .name = "{n}"}};
"""
        pick = f"(({row.overwrite}) && {alias_free}) ? &nl_cl_{n}_w : {pick}"
    return f"""
struct nl_args_{n} {{
{fields}}};
static void nl_cpu_{n}(void *buffers[], void *cl_arg)
{{
    const struct nl_args_{n} *packed = cl_arg;
    nl_{n}({", ".join(unpack)});
}}
{_opencl_wrapper(row)}{_cuda_wrapper(row)}static struct starpu_perfmodel nl_model_{n} = {{
    .type = STARPU_HISTORY_BASED, .symbol = "nl_{n}"}};
static struct starpu_codelet nl_cl_{n} = {{
    .cpu_funcs = {{nl_cpu_{n}}}, .cpu_funcs_name = {{"nl_cpu_{n}"}},{ocl}
    .nbuffers = {nbuf}, .modes = {{{modes}}}, .model = &nl_model_{n}, .name = "{n}"}};
{twin}{submit_prototype(row)[:-1]}
{{
#ifdef NL_HAVE_MPI
    if (nl_mpi_active) {{  /* every rank: the task runs where its written data lives */
        struct starpu_task *t = starpu_mpi_task_build(nl_mpi_comm, &nl_cl_{n}, {mpi_args});
        int ret = 0;
        if (t) {{
            struct nl_args_{n} *packed = malloc(sizeof *packed);
            if (!packed) return -ENOMEM;
{set_args.replace("    ", "            ")}            t->cl_arg = packed;
            t->cl_arg_size = sizeof *packed;
            t->cl_arg_free = 1;
            t->flops = (double)({row.flops});
            ret = nl_submit_task(t, {op_id});
        }}
        int post = starpu_mpi_task_post_build(nl_mpi_comm, &nl_cl_{n}, {mpi_args});
        return ret ? ret : post;
    }}
#endif
    struct nl_args_{n} *packed = malloc(sizeof *packed);
    if (!packed) return -ENOMEM;
{set_args}    struct starpu_task *t = starpu_task_create();
    t->cl = {pick};
{set_handles}    t->cl_arg = packed;
    t->cl_arg_size = sizeof *packed;
    t->cl_arg_free = 1;
    t->flops = (double)({row.flops});
    return nl_submit_task(t, {op_id});
}}
"""


def _direct(op_id, row):
    """A call of the kernel itself, without StarPU: buffers as raw pointers, the
    scalar arguments as doubles (exact for every i32, f32 and the i64 sizes used)."""
    args = [f"({typ})a[{i}]" for i, (typ, _) in enumerate(_args(row))]
    args += [f"({'const ' if ro else ''}{typ} *)p[{i}]" for i, _, typ, _, ro in _buffers(row)]
    return f"    case {op_id}: nl_{row.name}({', '.join(args)}); return 0;\n"


def _direct_switch():
    """nl_call_op(op, pointers, args): the timing harness (kernels/bench.c) calls
    kernels through it, so every row of the table is reachable without StarPU."""
    cases = "".join(_direct(i, r) for i, r in enumerate(CODELETS))
    sigs = ", ".join(f'"{r.buffers}|{r.args}|{r.flops}"' for r in CODELETS)
    return (f"static const char *op_sigs[] = {{{sigs}}};\n"
            "const char *nl_op_signature(int i) { return op_sigs[i]; }\n"
            "int nl_call_op(int op, void **p, const double *a)\n{\n    switch (op) {\n"
            + cases + "    default: return -1;\n    }\n}\n")


def opencl_source():
    """kernels/formula.h (what formulas call), every kernels/opencl/*.clh file (helpers
    the kernels share), the kernels generated from the table's formulas, then every *.cl
    file, each in name order: the one program the runtime compiles for each OpenCL
    device."""
    here = os.path.dirname(os.path.abspath(__file__))
    parts = []
    for path in ([os.path.join(here, "formula.h")]
                 + sorted(glob.glob(os.path.join(here, "opencl", "*.clh")))):
        with open(path, encoding="utf-8") as f:
            parts.append(f"/* {os.path.basename(path)} */\n" + f.read())
    parts.append(formulas.opencl_kernels(CODELETS))
    for path in sorted(glob.glob(os.path.join(here, "opencl", "*.cl"))):
        with open(path, encoding="utf-8") as f:
            parts.append(f"/* {os.path.basename(path)} */\n" + f.read())
    return "\n".join(parts)


def _c_string(text):
    """text as a C string literal, one source line per line"""
    lines = text.splitlines(keepends=True) or [""]
    return "\n".join('    "' + line.replace("\\", "\\\\").replace('"', '\\"')
                     .replace("\n", "\\n") + '"' for line in lines)


def generate_c():
    """C source: every codelet, its submit helper, the op names for traces and the
    direct calls for the kernel benchmark."""
    head = "#define NL_WITH_STARPU\n#include <errno.h>\n#include <stdlib.h>\n#include \"core.h\"\n"
    head += ("#ifdef NL_HAVE_OPENCL\n#include \"opencl/launch.h\"\n"
             f"const char nl_ocl_source[] =\n{_c_string(opencl_source())};\n#endif\n")
    head += ("#ifdef STARPU_USE_CUDA\n#include <starpu_cublas_v2.h>\n"
             '#include "cuda/prototypes.h"\n#endif\n')
    protos = "\n".join(kernel_prototype(r) for r in CODELETS)
    names = ", ".join(f'"{r.name}"' for r in CODELETS)
    has_ocl = ", ".join("1" if r.opencl else "0" for r in CODELETS)
    has_cuda = ", ".join("1" if r.cuda else "0" for r in CODELETS)
    table = (f"static const char *op_names[] = {{{names}}};\n"
             f"int nl_op_count(void) {{ return {len(CODELETS)}; }}\n"
             "const char *nl_op_name(int i) { return op_names[i]; }\n"
             f"static const int op_opencl[] = {{{has_ocl}}};\n"
             "int nl_op_has_opencl(int i) { return op_opencl[i]; }\n"
             f"static const int op_cuda[] = {{{has_cuda}}};\n"
             "int nl_op_has_cuda(int i) { return op_cuda[i]; }\n")
    # each op's performance model, for reading what it learned (kernels/runtime/perfmodels.c)
    models = ("static struct starpu_perfmodel *op_models[] = {"
              + ", ".join(f"&nl_model_{r.name}" for r in CODELETS) + "};\n"
              "struct starpu_perfmodel *nl_op_model(int i) { return op_models[i]; }\n")
    return (head + protos + "\n" + table + _direct_switch()
            + "".join(_glue(i, r) for i, r in enumerate(CODELETS)) + models)


def generate_prototypes():
    """A header of every kernel's C signature, as the table defines it."""
    protos = "\n".join(kernel_prototype(r) for r in CODELETS)
    return ("/* Generated by kernels/build.py from codelets.py: do not edit. */\n#pragma once\n"
            "#include <stdint.h>\n\n" + protos + "\n")


def generate_cuda_prototypes():
    """kernels/cuda/prototypes.h: every CUDA host function's signature, as the table defines
    it. Every .cu file includes it, so nvcc checks each against its row."""
    protos = "\n".join(cuda_prototype(r) for r in CODELETS if r.cuda)
    return ("/* Generated by kernels/build.py from codelets.py: do not edit. */\n#pragma once\n"
            "#include <stdint.h>\n#ifndef NL_CU_EMULATE   /* emulate.h stands in */\n"
            "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n#endif\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n" + protos
            + "\n#ifdef __cplusplus\n}\n#endif\n")


def generate_cuda_emulation_switch():
    """``nl_cu_call_op(op, pointers, args)``: every host function of a cuda="kernel" row
    called by its op id (the extension's ``nl_call_op`` numbering), the scalar arguments as
    doubles, for the host emulation of the kernels (kernels/cuda/emulate.h). NULL when done,
    else the function's error text; "no CUDA kernel" for other ops (cuBLAS rows)."""
    cases = ""
    for op_id, row in enumerate(CODELETS):
        if row.cuda != "kernel":
            continue
        args = ["(cudaStream_t)0"] + [f"({typ})a[{i}]" for i, (typ, _) in enumerate(_args(row))]
        args += [f"({typ} *)p[{i}]" for i, _, typ, _, _ in _buffers(row)]
        cases += f"    case {op_id}: return nl_cu_{row.name}({', '.join(args)});\n"
    return ('#include "common.cuh"\n\n'
            "/* how many blocks fill the emulated GPU: below it, a reduction is cut in chunks "
            "*/\nextern \"C\" void nl_emu_set_enough_blocks(long long blocks)\n"
            "{\n    nl_cu_enough_blocks = blocks;\n}\n\n"
            'extern "C" const char *nl_cu_call_op(int op, void **p, '
            "const double *a)\n{\n    switch (op) {\n" + cases
            + '    default: return "no CUDA kernel";\n    }\n}\n')


def generate_cdef():
    """Declarations of the submit helpers, for cffi."""
    protos = "\n".join(submit_prototype(r) for r in CODELETS)
    return (protos + "\nint nl_op_count(void);\nconst char *nl_op_name(int i);\n"
            "int nl_op_has_opencl(int i);\nint nl_op_has_cuda(int i);\n"
            "const char *nl_op_signature(int i);\n")


# ---- the Python tile loops of the element-wise family --------------------------------

def _py_params(row):
    """The row's ``py`` signature as (op name, [(parameter, default text or None)])."""
    name, _, rest = row.py.partition("(")
    if not rest.endswith(")") or not name.isidentifier():
        raise TableError(f"codelet {row.name}: py={row.py!r} is not a signature like "
                         "'gelu(x, out=None)'")
    params = []
    for item in filter(None, (p.strip() for p in rest[:-1].split(","))):
        pname, _, default = item.partition("=")
        params.append((pname.strip(), default.strip() or None))
    return name, params


def bufs_in(bufs):
    """The names of the R buffers of a row's buffers (as _buffers yields them)."""
    return [b for _, _, _, b, ro in bufs if ro]


def elementwise_ops():
    """Per element-wise row: its Python op as a dict (name, row, inputs, output, whether
    the output is RW, scalars, params, doc, exps, width), checked against the row."""
    ops = []
    for row in CODELETS:
        if not row.py:
            continue
        name, params = _py_params(row)
        bufs = list(_buffers(row))
        args = [a for _, a in _args(row)]
        where = f"codelet {row.name} (py={row.py!r})"
        if args[:1] != ["n"] or next(_args(row))[0] != "int64_t":
            raise TableError(f"{where}: an element-wise row's first argument is 'i64 n', "
                             "the tile's element count")
        if any(typ != "float" for _, _, typ, _, _ in bufs):
            raise TableError(f"{where}: element-wise buffers are float32 (no ':i64' or ':bf16')")
        written = [(bname, mode) for _, mode, _, bname, ro in bufs if not ro]
        if len(written) != 1 or written[0][1] not in ("STARPU_W", "STARPU_RW"):
            raise TableError(f"{where}: an element-wise row writes exactly one buffer, "
                             "in mode W or RW")
        output, mode = written[0]
        want = {b for _, _, _, b, _ in bufs} | set(args[1:])
        got = [p for p, _ in params]
        if sorted(got) != sorted(want) or len(set(got)) != len(got):
            raise TableError(f"{where}: its parameters must be the buffers and the scalar "
                             f"arguments but n, each once: {', '.join(sorted(want))}")
        defaults = dict(params)
        if mode == "STARPU_W" and defaults[output] != "None":
            raise TableError(f"{where}: the W output {output} needs the default None "
                             "(a new tensor)")
        if defaults[output] not in (None, "None") or any(defaults[i] is not None
                                                          for i in bufs_in(bufs)):
            raise TableError(f"{where}: only the output may have a default, and only None")
        if not row.doc:
            raise TableError(f"{where}: give its formula as doc=, the op's docstring")
        if row.width not in ("embd", "inner"):
            raise TableError(f"{where}: width={row.width!r} is neither 'embd' nor 'inner'")
        ops.append({"name": name, "row": row.name, "buffers": [b for _, _, _, b, _ in bufs],
                    "inputs": bufs_in(bufs), "output": output,
                    "rw": mode == "STARPU_RW", "scalars": args[1:], "params": params,
                    "doc": row.doc, "exps": row.exps, "width": row.width})
    names = [op["name"] for op in ops]
    if len(set(names)) != len(names):
        raise TableError(f"two element-wise rows generate the same Python op: {names}")
    return ops


def _q(names):
    return ", ".join(f'"{n}"' for n in names)


def _and(items):
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def _tuple(names):
    names = list(names)
    return f"({_q(names)}{',' if len(names) == 1 else ''})"


def _py_function(op):
    inputs, out, name = op["inputs"], op["output"], op["name"]
    tensors = set(op["buffers"])
    params = [f"{p}: {'TiledTensor' if p in tensors else 'float'}"
              + ("" if d is None else f"{' | None' if d == 'None' else ''} = {d}")
              for p, d in op["params"]]
    head = f"def {name}({', '.join(params)}) -> TiledTensor:"
    if len(head) > 100:   # one parameter per line
        head = (f"def {name}(\n" + "".join(f"    {p},\n" for p in params)
                + ") -> TiledTensor:")
    first = inputs[0]
    in_place_out = op["rw"] and dict(op["params"])[out] is None
    lay = inputs + ([out] if in_place_out else [])
    how = (f"``{out}`` is updated in place" if in_place_out
           else f"``{out}`` None makes a new tensor")
    text = (f"Element-wise: one ``{op['row']}`` task per tile. "
            + _and([f"``{t}``" for t in lay + ([] if out in lay else [out])])
            + f" share shape and tiles (float32); {how}; "
            f"``{out}`` may be " + " or ".join(f"``{i}``" for i in inputs)
            + f" itself. Returns ``{out}``. Generated from the codelet table "
            "(kernels/codelets.py).")
    doc = ('    """' + op["doc"] + "\n\n" + textwrap.fill(text, 96, initial_indent="    ",
                                                       subsequent_indent="    ")
           + '\n    """\n')
    body = "".join(f'    need_dtype({i}, np.float32, "{name}: {i}")\n' for i in inputs)
    if len(lay) > 1:
        body += f'    same_layout({", ".join(lay)}, names="{name}")\n'
    if out not in lay:
        body += f'    {out} = output({out}, {first}, "{name}: {out}")\n'
    body += f'    need_dtype({out}, np.float32, "{name}: {out}")\n'
    alias = (f'    no_alias("{name}", {{"{out}": {out}}}, '
             f"{{{', '.join(f'{chr(34)}{i}{chr(34)}: {i}' for i in inputs)}}}, "
             f"in_place={_tuple(inputs)})")
    body += (alias if len(alias) <= 100 else alias.replace(", in_place", ",\n" + " " * 13
                                                            + "in_place")) + "\n"
    hs = [f"h{b}" for b in op["buffers"]]
    body += (f"    {', '.join(hs)} = {', '.join(f'{b}.handles' for b in op['buffers'])}\n"
             f"    sizes = {first}.traits.tile_sizes\n")
    call = ", ".join([f"{h}[i]" for h in hs] + ["sizes[i]"] + op["scalars"])
    body += (f"    for i in range({first}.ntiles):\n"
             f"        check(lib.nl_submit_{op['row']}({call}))\n"
             f"    return {out}\n")
    return f"\n\n{head}\n{doc}{body}"


def generate_python():
    """``nntile_lab/ops/_generated.py``: the element-wise ops' tile loops, and ``OPS``,
    what each one is (for the kernel benchmark and the alias tests)."""
    ops = elementwise_ops()
    meta = "".join(
        f'    "{op["name"]}": ElementwiseOp(\n        "{op["name"]}", "{op["row"]}", '
        f'{_tuple(op["inputs"])}, "{op["output"]}", {op["rw"]}, {_tuple(op["scalars"])}, '
        f'"{op["exps"]}", "{op["width"]}"),\n' for op in ops)
    return ('"""The element-wise tiled ops, one task per tile: generated by kernels/build.py '
            "from\nthe codelet table (kernels/codelets.py): do not edit.\"\"\"\n"
            "from __future__ import annotations\n\n"
            "from typing import NamedTuple\n\n"
            "import numpy as np\n\n"
            "from nntile_lab._lib import lib\n"
            "from nntile_lab.ops._common import check, need_dtype, no_alias, output, "
            "same_layout\n"
            "from nntile_lab.tensor import TiledTensor\n\n"
            + "__all__ = [\n" + "".join(f'    "{op["name"]}",\n' for op in ops) + "]\n\n\n"
            "class ElementwiseOp(NamedTuple):\n"
            '    """What a generated op is: its name, its codelet, its tensor parameters '
            "(inputs,\n    output, whether the output is read: RW), its scalar parameters, "
            "and the row's exps\n"
            '    formula and model width (for the kernel benchmark)."""\n'
            "    name: str\n    row: str\n    inputs: tuple\n    output: str\n    rw: bool\n"
            "    scalars: tuple\n    exps: str\n    width: str\n\n\n"
            f"OPS = {{\n{meta}}}\n"
            + "".join(_py_function(op) for op in ops))
