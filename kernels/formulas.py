"""The kernels of the codelet table's ``formula=`` rows, generated for C, OpenCL and CUDA from
the one formula (kernels/codelets.py says how a formula reads).

A formula is C statements over one value: a buffer's bare name is its value at the current
index (``x`` reads ``x[i]``, ``y = ...`` writes ``y[i]``), a scalar argument is itself,
locals are declared as in C, and what it calls comes from kernels/formula.h (the same text
compiles in all three back ends). Two index spaces, from the row's first arguments:

  ``i64 n``               n values, index ``i``: every buffer holds n values.
  ``i64 m, i64 k, i64 n`` a tile viewed as (m, k, n) (kernels/cpu/axis.h), index ``id`` of
                          value (i, j, l); a bare name is the value there, and a slice
                          (one value per (i, l)) or a fiber (one per j) is read by its index:
                          ``s[e]`` (e = i·n + l), ``gamma[j]``; ``mn`` = m·n. ``per_slice``
                          statements compute what depends on the slice entry alone: the C
                          kernel runs them once per fiber when the axis is the last one
                          (n = 1), the others per value; ``per_fiber`` ones what depends on
                          the axis position alone: the C kernel runs them once per row of n
                          values when n > 1.

``overwrite`` in a formula is the row's overwrite condition (e.g. beta == 0): the C kernel is
compiled twice, with it 1 and 0, so that each loop is the plain expression (no select left to
read an uninitialised output, nothing for the compiler to fuse differently); OpenCL and CUDA
evaluate it once per work item.

What the back ends emit:
  C       ``void nl_<name>(args, buffers)``: the loop, into kernels/cpu/formulas.c
  OpenCL  ``__kernel void nl_<name>``: one work item per value, into the program's source
  CUDA    ``nl_cu_<name>(stream, ...)`` and its kernel, one thread per value (grid-stride),
          into kernels/cuda/formulas.cu
The expression is each back end's own compiler's to vectorise or fuse; C keeps the
statements' order and floating-point types as written, so a formula that spells out what a
hand-written C kernel computed gives its results bit for bit (scripts/kernel_outputs.py).
"""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))

C_SCALARS = {"i64": "int64_t", "i32": "int32_t", "f32": "float"}
C_BUFFERS = {"f32": "float", "i64": "int64_t", "bf16": "uint16_t"}
OCL_SCALARS = {"i64": "long", "i32": "int", "f32": "float"}
OCL_BUFFERS = {"f32": "float", "i64": "long", "bf16": "ushort"}
DECL_TYPES = ("float", "double", "nl_acc", "int64_t", "int32_t", "uint32_t", "uint16_t", "int")
C_WORDS = {"const", "if", "else", "return", "sizeof", *DECL_TYPES}
INDEX = {"n": {"i"}, "mkn": {"id", "e", "j", "mn"}}
SLICE_INDEX = {"e", "mn"}
FIBER_INDEX = {"j"}
IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
NL_BODY = "static inline __attribute__((always_inline))"


class TableError(ValueError):
    """A row of the codelet table that the generator cannot turn into kernels or an op."""


def helpers():
    """The names kernels/formula.h gives formulas: its functions and macros."""
    with open(os.path.join(HERE, "formula.h"), encoding="utf-8") as f:
        text = f.read()
    return (set(re.findall(r"^NL_FN\s+\w+\s+(\w+)\s*\(", text, re.M))
            | set(re.findall(r"^#define\s+(\w+)", text, re.M))) - {"NL_FN", "NL_FORMULA_H"}


def _statements(text):
    """text split at its top-level semicolons, stripped, empty ones dropped"""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [s for s in out + [cur.strip()] if s]


def _declared(stmt):
    """the locals a statement declares (``float s, q`` or ``nl_acc d = ...``)"""
    m = re.match(r"(?:const\s+)?(" + "|".join(DECL_TYPES) + r")\s+(.*)$", stmt, re.S)
    if not m:
        return []
    names, depth, cur = [], 0, ""
    for ch in m.group(2) + ",":
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            names.append(cur.split("=")[0].strip())
            cur = ""
        else:
            cur += ch
    return names


class Kernel:
    """A formula row, checked: its buffers, arguments, index space and statements."""

    def __init__(self, row, known=None):
        self.row, self.name = row, row.name
        where = f"codelet {row.name} (formula)"
        self.bufs = []
        for item in row.buffers.split(","):
            mode, name = item.split()
            mode, _, dtype = mode.partition(":")
            self.bufs.append((mode, dtype or "f32", name))
        self.args = [tuple(item.split()) for item in row.args.split(",")]
        first = [a for _, a in self.args[:3]]
        if first[:3] == ["m", "k", "n"] and all(t == "i64" for t, _ in self.args[:3]):
            self.kind = "mkn"
        elif first[:1] == ["n"] and self.args[0][0] == "i64":
            self.kind = "n"
        else:
            raise TableError(f"{where}: a formula row's arguments start with 'i64 n' (n "
                             "values) or 'i64 m, i64 k, i64 n' (an (m, k, n) tile)")
        self.per_slice = _statements(row.per_slice)
        self.per_fiber = _statements(row.per_fiber)
        self.body = _statements(row.formula)
        if (self.per_slice or self.per_fiber) and self.kind != "mkn":
            raise TableError(f"{where}: per_slice and per_fiber need an (m, k, n) row")
        if not row.doc:
            raise TableError(f"{where}: give its formula in words as doc=, the kernel's "
                             "comment")
        bufs = {b for _, _, b in self.bufs}
        scalars = {a for _, a in self.args}
        known = helpers() if known is None else known
        locals_ = [n for s in self.per_slice + self.per_fiber + self.body for n in _declared(s)]
        clash = set(locals_) & (bufs | scalars | INDEX[self.kind] | {"overwrite"} | known)
        if clash or len(set(locals_)) != len(locals_):
            raise TableError(f"{where}: local {', '.join(sorted(clash) or locals_)} is "
                             "declared twice or hides a buffer, argument, index or helper")
        allowed = (bufs | scalars | set(locals_) | INDEX[self.kind] | known | C_WORDS
                   | {"overwrite"})
        for stmt in self.per_slice + self.per_fiber + self.body:
            unknown = sorted(set(IDENT.findall(stmt)) - allowed)
            if unknown:
                raise TableError(f"{where}: {', '.join(unknown)} in {stmt!r} is not a buffer, "
                                 "argument, local, index or kernels/formula.h function of "
                                 "the row")
        for field, stmts, index, what in (("per_slice", self.per_slice, SLICE_INDEX, "slices"),
                                          ("per_fiber", self.per_fiber, FIBER_INDEX, "fibers")):
            own = {n for s in stmts for n in _declared(s)}
            for stmt in stmts:
                words = set(IDENT.findall(stmt))
                bad = (set(self._bare(stmt, bufs)) | (words & (INDEX["mkn"] - index))
                       | (words & (set(locals_) - own)))
                if bad:
                    raise TableError(f"{where}: {field} {stmt!r} reads "
                                     f"{', '.join(sorted(bad))}: only {what} indexed by "
                                     f"{', '.join(sorted(index))}, arguments and its own "
                                     "locals")
        used = {w for s in self.per_slice + self.per_fiber + self.body for w in IDENT.findall(s)}
        self.uses_overwrite = "overwrite" in used
        if self.uses_overwrite != bool(row.overwrite):
            raise TableError(
                f"{where}: " + ("its formula must say what it computes when the output is "
                                f"written unread ({row.overwrite}): use `overwrite`"
                                if row.overwrite else
                                "`overwrite` needs the row's overwrite= condition"))
        self.indices = used & INDEX[self.kind]
        for mode, _, b in self.bufs:
            assigned = any(re.match(rf"{b}\s*(?:\[[^]]*\]\s*)?[-+*/]?=(?!=)", s)
                           for s in self.body)
            if mode == "W" and not assigned:
                raise TableError(f"{where}: output {b} (W) is never assigned")
            if mode == "R" and assigned:
                raise TableError(f"{where}: {b} is read-only (R) but assigned")

    @staticmethod
    def _bare(stmt, bufs):
        """the buffer names in stmt not followed by an index"""
        for m in IDENT.finditer(stmt):
            if m.group(0) in bufs and not stmt[m.end():].lstrip().startswith("["):
                yield m.group(0)

    def _indexed(self, stmt, index):
        """stmt with each bare buffer name read or written at ``index``"""
        bufs = {b for _, _, b in self.bufs}

        def sub(m):
            w = m.group(0)
            if w in bufs and not stmt[m.end():].lstrip().startswith("["):
                return f"{w}[{index}]"
            return w
        return IDENT.sub(sub, stmt)

    def _lines(self, stmts, index, indent):
        return "".join(f"{indent}{self._indexed(s, index)};\n" for s in stmts)

    # ---- C ---------------------------------------------------------------------------
    def c_params(self):
        params = [f"{C_SCALARS[t]} {a}" for t, a in self.args]
        params += [f"{'const ' if mode == 'R' else ''}{C_BUFFERS[d]} *{b}"
                   for mode, d, b in self.bufs]
        return params

    def _c_loops(self):
        if self.kind == "n":
            return ("    for (int64_t i = 0; i < n; i++) {\n"
                    + self._lines(self.body, "i", " " * 8) + "    }\n")
        mn = "    const int64_t mn = m * n;\n" if "mn" in self.indices else ""
        e1 = " " * 12 + "const int64_t e = i;\n" if "e" in self.indices else ""
        en = " " * 20 + "const int64_t e = i * n + l;\n" if "e" in self.indices else ""
        return (mn + "    if (n == 1)   /* the axis is the last one: per fiber, then along it */\n"
                "        for (int64_t i = 0; i < m; i++) {\n" + e1
                + self._lines(self.per_slice, "", " " * 12)
                + "            for (int64_t j = 0; j < k; j++) {\n"
                "                const int64_t id = i * k + j;\n"
                + self._lines(self.per_fiber + self.body, "id", " " * 16)
                + "            }\n        }\n"
                "    else\n        for (int64_t i = 0; i < m; i++)\n"
                "            for (int64_t j = 0; j < k; j++) {\n"
                + self._lines(self.per_fiber, "", " " * 16)
                + "                for (int64_t l = 0; l < n; l++) {\n" + en
                + " " * 20 + "const int64_t id = (i * k + j) * n + l;\n"
                + self._lines(self.per_slice, "", " " * 20)
                + self._lines(self.body, "id", " " * 20) + "                }\n            }\n")

    def c_source(self):
        comment = f"/* {self.row.doc} */\n"
        params = ", ".join(self.c_params())
        if not self.uses_overwrite:
            return f"{comment}void nl_{self.name}({params})\n{{\n{self._c_loops()}}}\n"
        names = [a for _, a in self.args] + [b for _, _, b in self.bufs]
        call = ", ".join(names)
        return (f"{NL_BODY} void {self.name}_body({params}, const int overwrite)\n"
                f"{{\n{self._c_loops()}}}\n\n{comment}void nl_{self.name}({params})\n{{\n"
                f"    if ({self.row.overwrite})   /* the output written unread */\n"
                f"        {self.name}_body({call}, 1);\n    else\n"
                f"        {self.name}_body({call}, 0);\n}}\n")

    # ---- OpenCL ----------------------------------------------------------------------
    def ocl_source(self):
        params = [f"{OCL_SCALARS[t]} {a}" for t, a in self.args]
        params += [f"__global {'const ' if mode == 'R' else ''}{OCL_BUFFERS[d]} *{b}"
                   for mode, d, b in self.bufs]
        if self.kind == "n":
            head = "    const long i = get_global_id(0);\n    if (i >= n) return;\n"
            index = "i"
        else:
            head = ("    const long id = get_global_id(0);\n    if (id >= m * k * n) return;\n"
                    + self._ocl_cuda_index("const long"))
            index = "id"
        if self.uses_overwrite:
            head += f"    const int overwrite = {self.row.overwrite};\n"
        return (f"/* {self.row.doc} */\n__kernel void nl_{self.name}({', '.join(params)})\n{{\n"
                + head + self._lines(self.per_slice + self.per_fiber, "", "    ")
                + self._lines(self.body, index, "    ") + "}\n")

    def _ocl_cuda_index(self, typ, indent="    "):
        """the slice entry e, axis position j and m·n of value id, those the formula uses"""
        out = ""
        if "e" in self.indices:
            out += f"{indent}{typ} e = id / (k * n) * n + id % n;\n"
        if "j" in self.indices:
            out += f"{indent}{typ} j = id / n % k;\n"
        if "mn" in self.indices:
            out += f"{indent}{typ} mn = m * n;\n"
        return out

    # ---- CUDA ------------------------------------------------------------------------
    def cuda_source(self):
        params = ", ".join(self.c_params())
        names = ", ".join([a for _, a in self.args] + [b for _, _, b in self.bufs])
        count = "n" if self.kind == "n" else "m * k * n"
        index = "i" if self.kind == "n" else "id"
        flag = (f"    const int overwrite = {self.row.overwrite};\n" if self.uses_overwrite
                else "")
        inner = "" if self.kind == "n" else self._ocl_cuda_index("const int64_t", " " * 8)
        return (f"/* {self.row.doc} */\n__global__ static void {self.name}_kernel({params})\n{{\n"
                f"{flag}    NL_CU_FOR({index}, {count}) {{\n{inner}"
                + self._lines(self.per_slice + self.per_fiber, "", " " * 8)
                + self._lines(self.body, index, " " * 8) + "    }\n}\n\n"
                f"const char *nl_cu_{self.name}(cudaStream_t stream, {params})\n{{\n"
                f"    NL_CU_LAUNCH({self.name}_kernel, {count}, stream, {names});\n}}\n")


def kernels(rows):
    """The Kernel of every formula row, in table order."""
    known = helpers()
    return [Kernel(r, known) for r in rows if r.formula]


HEADER = ("/* Generated by kernels/build.py from the formulas of kernels/codelets.py (kernels/"
          "formulas.py): do not edit. */\n")


def c_file(rows):
    """kernels/cpu/formulas.c"""
    return (HEADER + '#include "prototypes.h"\n#include <stdint.h>\n\n#include "formula.h"\n\n'
            + "\n".join(k.c_source() for k in kernels(rows)))


def opencl_kernels(rows):
    """The formula rows' OpenCL kernels, for the program (after kernels/formula.h)."""
    return HEADER + "\n".join(k.ocl_source() for k in kernels(rows))


def cuda_file(rows):
    """kernels/cuda/formulas.cu"""
    return (HEADER + '#include "common.cuh"\n#include "../formula.h"\n\n'
            + "\n".join(k.cuda_source() for k in kernels(rows)))
