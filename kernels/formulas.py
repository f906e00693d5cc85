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
          into kernels/cuda/formulas.cu; a reduction as blocks of threads cooperating on a
          few results, a fixed tree over their lanes, chunks over blocks where the results
          are few (kernels/cuda/common.cuh, nl_cu_geo)
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
# and the one math function the three languages spell alike: sqrt of an nl_acc (double)
C_WORDS = {"const", "sizeof", "sqrt", *DECL_TYPES}
IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
NL_BODY = "static inline __attribute__((always_inline))"
# the index names each section of each kind of row may read
MAP_N = {"i"}
MKN = {"id", "e", "j", "i", "l", "mn"}
SECTIONS = {   # kind -> {section: its index names}
    "n": {"formula": MAP_N},
    "mkn": {"per_slice": {"e", "mn"}, "per_fiber": {"j"}, "formula": MKN},
    "slice": {"per_slice": {"e", "mn"}, "accumulate": {"id", "e", "j", "mn"},
              "store": {"e", "mn"}, "formula": {"id", "e", "j", "mn"}},
    "fiber": {"accumulate": {"id", "e", "j", "mn"}, "store": {"j"}},
}
ORDER = ("per_slice", "per_fiber", "accumulate", "store", "formula")
# what a section may read of the others' locals (the sums: accumulate and store)
READS = {"per_slice": (), "per_fiber": (), "accumulate": ("per_slice",),
         "store": ("per_slice",), "formula": ("per_slice", "per_fiber", "store")}


class TableError(ValueError):
    """A row of the codelet table that the generator cannot turn into kernels or an op."""


def helpers():
    """The names kernels/formula.h gives formulas: its functions and macros."""
    with open(os.path.join(HERE, "formula.h"), encoding="utf-8") as f:
        text = f.read()
    return (set(re.findall(r"^NL_FN\s+\w+\s+(\w+)\s*\(", text, re.M))
            | set(re.findall(r"^#define\s+(\w+)", text, re.M))) - {"NL_FN", "NL_FORMULA_H"}


def _split_top(text, sep):
    """text split at its top-level ``sep`` (outside parentheses and brackets), stripped"""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()]


def _statements(text):
    return [s for s in _split_top(text, ";") if s]


def _declaration(stmt):
    """(type, [(name, initializer or None)]) of a declaration (``float s, q``,
    ``const nl_acc d = x - m``), or None for another statement"""
    m = re.match(r"(const\s+)?(" + "|".join(DECL_TYPES) + r")\s+(.*)$", stmt, re.S)
    if not m:
        return None
    out = []
    for item in _split_top(m.group(3), ","):
        name, eq, init = item.partition("=")
        out.append((name.strip(), init.strip() if eq else None))
    return (m.group(1) or "") + m.group(2), out


def _declared(stmt):
    d = _declaration(stmt)
    return [n for n, _ in d[1]] if d else []


def _rename(stmt, names):
    """stmt with each identifier of ``names`` (a dict) replaced by its value"""
    return IDENT.sub(lambda m: names.get(m.group(0), m.group(0)), stmt)


class Kernel:
    """A formula row, checked: its buffers, arguments, kind and statements."""

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
        mkn = first[:3] == ["m", "k", "n"] and all(t == "i64" for t, _ in self.args[:3])
        if row.reduce:
            if row.reduce not in ("slice", "fiber") or not mkn:
                raise TableError(f"{where}: reduce={row.reduce!r}: a reduction is 'slice' "
                                 "(along the axis) or 'fiber' (along the others) of an "
                                 "'i64 m, i64 k, i64 n' row")
            self.kind = row.reduce
        elif mkn:
            self.kind = "mkn"
        elif first[:1] == ["n"] and self.args[0][0] == "i64":
            self.kind = "n"
        else:
            raise TableError(f"{where}: a formula row's arguments start with 'i64 n' (n "
                             "values) or 'i64 m, i64 k, i64 n' (an (m, k, n) tile)")
        self.sec = {f: _statements(getattr(row, f)) for f in ORDER}
        self.sums = [s for s in _split_top(row.sums, ",") if s]
        allowed_secs = SECTIONS[self.kind]
        for f in ORDER:
            if self.sec[f] and f not in allowed_secs:
                raise TableError(f"{where}: {f}= has no place in a row of this kind "
                                 f"({'reduce=' + self.kind if row.reduce else self.kind})")
        if row.reduce and not (self.sums and self.sec["accumulate"] and self.sec["store"]):
            raise TableError(f"{where}: a reduction needs sums=, accumulate= and store=")
        if not row.reduce and (self.sums or not self.sec["formula"]):
            raise TableError(f"{where}: sums= needs reduce=, and a map needs its formula=")
        if not row.doc:
            raise TableError(f"{where}: give its formula in words as doc=, the kernel's "
                             "comment")
        self.bufnames = {b for _, _, b in self.bufs}
        scalars = {a for _, a in self.args}
        known = helpers() if known is None else known
        self.locals = {f: [n for st in self.sec[f] for n in _declared(st)] for f in ORDER}
        every = [n for f in ORDER for n in self.locals[f]] + self.sums
        taken = self.bufnames | scalars | MKN | MAP_N | {"overwrite"} | known | C_WORDS
        clash = set(every) & taken
        if clash or len(set(every)) != len(every):
            raise TableError(f"{where}: local {', '.join(sorted(clash) or every)} is "
                             "declared twice or hides a buffer, argument, index or helper")
        used = set()
        for f in ORDER:
            index = allowed_secs.get(f, set())
            others = {n for g in READS[f] for n in self.locals[g]}
            sums = set(self.sums) if f in ("accumulate", "store", "formula") else set()
            ok = (self.bufnames | scalars | known | C_WORDS | {"overwrite"} | index
                  | set(self.locals[f]) | others | sums)
            for st in self.sec[f]:
                words = set(IDENT.findall(st))
                used |= words
                unknown = sorted(words - ok)
                if unknown:
                    raise TableError(
                        f"{where}: {', '.join(unknown)} in {f} {st!r} is not a buffer, "
                        f"argument, local, index ({', '.join(sorted(index))}) or "
                        "kernels/formula.h function it may read there")
                bare = sorted(set(self._bare(st)))
                if bare and f not in ("accumulate", "formula"):
                    raise TableError(f"{where}: {f} {st!r} reads {', '.join(bare)} at no "
                                     f"index: there it reads buffers by "
                                     f"{', '.join(sorted(index))}")
        self.uses_overwrite = "overwrite" in used
        if self.uses_overwrite != bool(row.overwrite):
            raise TableError(
                f"{where}: " + ("its formula must say what it computes when the output is "
                                f"written unread ({row.overwrite}): use `overwrite`"
                                if row.overwrite else
                                "`overwrite` needs the row's overwrite= condition"))
        self.indices = used & (MKN | MAP_N)
        writes = self.sec["formula"] + self.sec["store"] + self.sec["accumulate"]
        for mode, _, b in self.bufs:
            assigned = any(re.match(rf"{b}\s*(?:\[.*?\]\s*)?[-+*/]?=(?!=)", st) for st in writes)
            if mode == "W" and not assigned:
                raise TableError(f"{where}: output {b} (W) is never assigned")
            if mode == "R" and assigned:
                raise TableError(f"{where}: {b} is read-only (R) but assigned")
        for st in self.sec["accumulate"]:
            if not (_declaration(st) or re.match(rf"({'|'.join(self.sums)})\s*\+=", st)):
                raise TableError(f"{where}: accumulate {st!r}: a local, or a sum += a term")
        seen_store = False
        for st in self.sec["store"]:
            if _declaration(st) and seen_store:
                raise TableError(f"{where}: store {st!r}: its locals come before its stores")
            seen_store |= not _declaration(st)

    def _bare(self, stmt):
        """the buffer names in stmt not followed by an index"""
        for m in IDENT.finditer(stmt):
            if m.group(0) in self.bufnames and not stmt[m.end():].lstrip().startswith("["):
                yield m.group(0)

    def _at(self, stmt, index, lanes=None):
        """stmt with each bare buffer name read or written at ``index``, and each name of
        ``lanes`` (per-lane locals of a C reduction) read at lane nl_q"""
        names = {n: f"{n}_q[nl_q]" for n in (lanes or ())}

        def sub(m):
            w = m.group(0)
            if w in self.bufnames and not stmt[m.end():].lstrip().startswith("["):
                return f"{w}[{index}]"
            return names.get(w, w)
        return IDENT.sub(sub, stmt)

    def _lines(self, stmts, index, indent, lanes=None):
        return "".join(f"{indent}{self._at(s, index, lanes)};\n" for s in stmts)

    def _lane_lines(self, stmts, indent, lanes):
        """C: statements of a per-lane section, its declarations as stores into the lanes'
        arrays (declared by _lane_arrays)"""
        out = ""
        for st in stmts:
            d = _declaration(st)
            if d is None:
                out += f"{indent}{self._at(st, '', lanes)};\n"
                continue
            for name, init in d[1]:
                if init is not None:
                    out += f"{indent}{name}_q[nl_q] = {self._at(init, '', lanes)};\n"
        return out

    def _lane_arrays(self, sections, indent):
        out = ""
        for f in sections:
            for st in self.sec[f]:
                d = _declaration(st)
                for name, _ in d[1] if d else ():
                    out += f"{indent}{d[0].replace('const ', '')} {name}_q[NL_NB];\n"
        return out

    def c_params(self):
        params = [f"{C_SCALARS[t]} {a}" for t, a in self.args]
        params += [f"{'const ' if mode == 'R' else ''}{C_BUFFERS[d]} *{b}"
                   for mode, d, b in self.bufs]
        return params

    def _names(self):
        return [a for _, a in self.args] + [b for _, _, b in self.bufs]

    # ---- C ---------------------------------------------------------------------------
    def _c_map_n(self):
        return ("    for (int64_t i = 0; i < n; i++) {\n"
                + self._lines(self.sec["formula"], "i", " " * 8) + "    }\n")

    def _c_map_mkn(self):
        use = self.indices
        ps, pf, body = self.sec["per_slice"], self.sec["per_fiber"], self.sec["formula"]
        inner1 = self._lines(pf + body, "id", " " * 16)
        innern = self._lines(body, "id", " " * 20)
        uses_id = re.search(r"\bid\b", inner1) is not None
        mn = "    const int64_t mn = m * n;\n" if "mn" in use else ""
        e1 = " " * 12 + "const int64_t e = i;\n" if "e" in use else ""
        id1 = " " * 16 + "const int64_t id = i * k + j;\n" if uses_id else ""
        l1 = " " * 16 + "const int64_t l = 0;\n" if "l" in use else ""
        en = " " * 20 + "const int64_t e = i * n + l;\n" if "e" in use else ""
        idn = " " * 20 + "const int64_t id = (i * k + j) * n + l;\n" if uses_id else ""
        return (mn + "    if (n == 1)   /* the axis is the last one: per fiber, then along it */\n"
                "        for (int64_t i = 0; i < m; i++) {\n" + e1
                + self._lines(ps, "", " " * 12)
                + "            for (int64_t j = 0; j < k; j++) {\n" + id1 + l1 + inner1
                + "            }\n        }\n"
                "    else\n        for (int64_t i = 0; i < m; i++)\n"
                "            for (int64_t j = 0; j < k; j++) {\n"
                + self._lines(pf, "", " " * 16)
                + "                for (int64_t l = 0; l < n; l++) {\n" + en + idn
                + self._lines(ps, "", " " * 20) + innern + "                }\n            }\n")

    def _c_slice_group(self):
        """The reduction of one group of a tile (kernels/cpu/axis.h: NL_NB lanes of slice
        entries, or of one fiber cut in rows): per-lane arrays for the slices' values, the
        sums and the stored values; the sums folded across lanes in "lanes" mode."""
        lanes = set(self.sums) | {n for f in ("per_slice", "store") for n in self.locals[f]}
        use = self.indices
        acc, fml = self.sec["accumulate"], self.sec["formula"]
        e_lane = "G.s + (lanes ? 0 : nl_q)"
        out = self._lane_arrays(("per_slice", "store"), "    ")
        out += "".join(f"    nl_acc {s}_q[NL_NB];\n" for s in self.sums)
        out += ("    for (int64_t nl_q = 0; nl_q < NL_NB; nl_q++) {   /* all: nl_fold_sum */\n"
                + "".join(f"        {s}_q[nl_q] = 0;\n" for s in self.sums) + "    }\n")
        if self.sec["per_slice"]:
            out += ("    for (int64_t nl_q = 0; nl_q < G.nb; nl_q++) {\n"
                    f"        const int64_t e = {e_lane};\n"
                    + self._lane_lines(self.sec["per_slice"], " " * 8, lanes) + "    }\n")

        def walk(stmts):
            head = ("    for (int64_t nl_c = 0; nl_c < G.nc; nl_c++)\n"
                    "        for (int64_t nl_q = 0; nl_q < nl_nq(G, nl_c); nl_q++) {\n"
                    "            const int64_t id = G.x + nl_c * G.sc + nl_q;\n")
            words = {w for st in stmts for w in IDENT.findall(st)}
            if "j" in words:
                head += "            const int64_t j = nl_j(lanes, nl_c, nl_q);\n"
            if "e" in words:
                head += f"            const int64_t e = {e_lane};\n"
            return head + self._lines(stmts, "id", " " * 12, lanes) + "        }\n"
        out += ("    const int64_t mn = m * n;\n" if "mn" in use else "") + walk(acc)
        out += "".join(f"    nl_fold_sum(G, lanes, {s}_q);\n" for s in self.sums)
        out += ("    for (int64_t nl_q = 0; nl_q < (lanes ? 1 : G.nb); nl_q++) {\n"
                "        const int64_t e = G.s + nl_q;\n"
                + self._lane_lines(self.sec["store"], " " * 8, lanes) + "    }\n")
        if fml:
            kept = self.locals["store"]
            if kept:   # "lanes" mode: the one slice entry's values in every lane
                out += ("    if (lanes)\n        for (int64_t nl_q = 1; nl_q < G.nb; nl_q++) {\n"
                        + "".join(f"            {n}_q[nl_q] = {n}_q[0];\n" for n in kept)
                        + "        }\n")
            out += walk(fml)
        return out

    def _c_fiber(self):
        """A fiber reduction, as kernels/cpu/axis.c's sum_fiber walks the tile: the axis the
        last one (n == 1): NL_NB positions j at a time, over the rows i; else per j, NL_NB
        lanes along l, then their sum."""
        use_words = {w for st in self.sec["accumulate"] for w in IDENT.findall(st)}
        sums = self.sums
        arrays = "".join(f"{' ' * 12}nl_acc {s}_q[NL_NB] = {{0}};\n" for s in sums)
        acc1 = " " * 20 + "const int64_t e = i;\n" if "e" in use_words else ""
        accn = " " * 24 + "const int64_t e = i * n + l0 + nl_q;\n" if "e" in use_words else ""
        mn = "    const int64_t mn = m * n;\n" if "mn" in self.indices else ""
        store = self.sec["store"]
        return (mn + "    if (n == 1)   /* rows of x run along the axis: NL_NB positions j at a "
                "time */\n        for (int64_t j0 = 0; j0 < k; j0 += NL_NB) {\n"
                "            const int64_t nj = k - j0 < NL_NB ? k - j0 : NL_NB;\n" + arrays
                + "            for (int64_t i = 0; i < m; i++)\n"
                "                for (int64_t nl_q = 0; nl_q < nj; nl_q++) {\n"
                "                    const int64_t j = j0 + nl_q, id = i * k + j;\n"
                + acc1 + self._lines(self.sec["accumulate"], "id", " " * 20, sums)
                + "                }\n"
                "            for (int64_t nl_q = 0; nl_q < nj; nl_q++) {\n"
                "                const int64_t j = j0 + nl_q;\n"
                + "".join(f"                const nl_acc {s} = {s}_q[nl_q];\n" for s in sums)
                + self._lines(store, "", " " * 16) + "            }\n        }\n"
                "    else   /* each (i, j) holds n contiguous values: NL_NB lanes per j */\n"
                "        for (int64_t j = 0; j < k; j++) {\n" + arrays
                + "            for (int64_t i = 0; i < m; i++)\n"
                "                for (int64_t l0 = 0; l0 < n; l0 += NL_NB)\n"
                "                    for (int64_t nl_q = 0; nl_q < (n - l0 < NL_NB ? n - l0 : "
                "NL_NB); nl_q++) {\n"
                "                        const int64_t id = (i * k + j) * n + l0 + nl_q;\n"
                + accn + self._lines(self.sec["accumulate"], "id", " " * 24, sums)
                + "                    }\n"
                + "".join(f"            nl_acc {s} = 0;\n" for s in sums)
                + "            for (int64_t nl_q = 0; nl_q < NL_NB; nl_q++) {\n"
                + "".join(f"                {s} += {s}_q[nl_q];\n" for s in sums)
                + "            }\n" + self._lines(store, "", " " * 12) + "        }\n")

    def c_source(self):
        comment = f"/* {self.row.doc} */\n"
        params = ", ".join(self.c_params())
        names = ", ".join(self._names())
        flag = ", const int overwrite" if self.uses_overwrite else ""
        if self.kind == "slice":
            group = (f"{NL_BODY} void {self.name}_group(struct nl_group G, int lanes, {params}"
                     f"{flag})\n{{\n{self._c_slice_group()}}}\n\n")
            run = (f"NL_FOR_GROUPS(m, k, n, {self.name}_group, {names}, {{}})" if flag
                   else f"NL_FOR_GROUPS(m, k, n, {self.name}_group, {names})")
            if not flag:
                return f"{group}{comment}void nl_{self.name}({params})\n{{\n    {run};\n}}\n"
            return (f"{group}{comment}void nl_{self.name}({params})\n{{\n"
                    f"    if ({self.row.overwrite}) {{   /* the output written unread */\n"
                    f"        {run.format(1)};\n    }} else {{\n        {run.format(0)};\n"
                    "    }\n}\n")
        loops = {"n": self._c_map_n, "mkn": self._c_map_mkn, "fiber": self._c_fiber}[self.kind]
        if not flag:
            return f"{comment}void nl_{self.name}({params})\n{{\n{loops()}}}\n"
        return (f"{NL_BODY} void {self.name}_body({params}{flag})\n"
                f"{{\n{loops()}}}\n\n{comment}void nl_{self.name}({params})\n{{\n"
                f"    if ({self.row.overwrite})   /* the output written unread */\n"
                f"        {self.name}_body({names}, 1);\n    else\n"
                f"        {self.name}_body({names}, 0);\n}}\n")

    # ---- OpenCL ----------------------------------------------------------------------
    def _value_index(self, typ, indent, words):
        """the indices of value id that the statements (their words) use, in OpenCL/CUDA"""
        out = ""
        for name, expr in (("e", "id / (k * n) * n + id % n"), ("j", "id / n % k"),
                           ("i", "id / (k * n)"), ("l", "id % n"), ("mn", "m * n")):
            if name in words:
                out += f"{indent}{typ} {name} = {expr};\n"
        return out

    def _words(self, *sections):
        return {w for f in sections for st in self.sec[f] for w in IDENT.findall(st)}

    def _split_store(self):
        """the store's locals (every work item) and its stores (one per result)"""
        st = self.sec["store"]
        return [s for s in st if _declaration(s)], [s for s in st if not _declaration(s)]

    def ocl_source(self):
        params = [f"{OCL_SCALARS[t]} {a}" for t, a in self.args]
        params += [f"__global {'const ' if mode == 'R' else ''}{OCL_BUFFERS[d]} *{b}"
                   for mode, d, b in self.bufs]
        flag = (f"    const int overwrite = {self.row.overwrite};\n" if self.uses_overwrite
                else "")
        head = f"/* {self.row.doc} */\n__kernel void nl_{self.name}({', '.join(params)})\n{{\n"
        if self.kind == "n":
            return (head + "    const long i = get_global_id(0);\n    if (i >= n) return;\n"
                    + flag + self._lines(self.sec["formula"], "i", "    ") + "}\n")
        if self.kind == "mkn":
            words = self._words("per_slice", "per_fiber", "formula")
            return (head + "    const long id = get_global_id(0);\n"
                    "    if (id >= m * k * n) return;\n" + self._value_index("const long", "    ",
                                                                               words)
                    + flag + self._lines(self.sec["per_slice"] + self.sec["per_fiber"], "",
                                         "    ")
                    + self._lines(self.sec["formula"], "id", "    ") + "}\n")
        decls, stores = self._split_store()
        red = "    __local nl_acc nl_red[NL_WG];\n"
        sums = "".join(f"    nl_acc {s} = 0;\n" for s in self.sums)
        fold = "".join(f"    {s} = nl_sum_y(nl_red, nl_p, {s});\n" for s in self.sums)
        mn = "    const long mn = m * n;\n" if "mn" in self.indices else ""
        tail = (self._lines(decls, "", "    ") + "    if (nl_p.on && nl_p.ly == 0) {\n"
                + self._lines(stores, "", "        ") + "    }\n")
        if self.kind == "fiber":
            # k reductions of m·n values (n > 1), or the slice sums of the (1, m, k) view
            return (head + red + "    const nl_pos nl_p = nl_axis_pos(n == 1 ? k : 1);\n"
                    "    const long j = nl_p.on ? (n == 1 ? nl_p.l : nl_p.i) : 0;\n" + mn
                    + flag + sums
                    + "    for (long nl_t = nl_p.ly; nl_p.on && nl_t < m * n; nl_t += nl_p.ny) {\n"
                    + ("        const long e = nl_t;\n" if "e" in self._words("accumulate") else "")
                    + "        const long id = (nl_t / n * k + j) * n + nl_t % n;\n"
                    + self._lines(self.sec["accumulate"], "id", " " * 8) + "    }\n" + fold
                    + tail + "}\n")
        walk = ("    for (long j = nl_p.ly; nl_p.on && j < k; j += nl_p.ny) {\n"
                "        const long id = nl_at(nl_p, k, n, j);\n")
        return (head + red + "    const nl_pos nl_p = nl_axis_pos(n);\n"
                "    const long e = nl_p.on ? nl_p.e : 0;   /* past the tile: reads entry 0, "
                "stores nothing */\n" + mn + flag
                + self._lines(self.sec["per_slice"], "", "    ") + sums + walk
                + self._lines(self.sec["accumulate"], "id", " " * 8) + "    }\n" + fold + tail
                + (walk + self._lines(self.sec["formula"], "id", " " * 8) + "    }\n"
                   if self.sec["formula"] else "") + "}\n")

    # ---- CUDA ------------------------------------------------------------------------
    def cuda_source(self):
        if self.kind in ("slice", "fiber"):
            return self._cuda_reduction()
        params = ", ".join(self.c_params())
        head = f"/* {self.row.doc} */\n__global__ static void {self.name}_kernel({params})\n{{\n"
        if self.kind == "n":
            count, body = "n", ("    NL_CU_FOR(i, n) {\n"
                                + self._lines(self.sec["formula"], "i", " " * 8) + "    }\n")
        else:
            words = self._words("per_slice", "per_fiber", "formula")
            count = "m * k * n"
            body = ("    NL_CU_FOR(id, m * k * n) {\n"
                    + self._value_index("const int64_t", " " * 8, words)
                    + self._lines(self.sec["per_slice"] + self.sec["per_fiber"], "", " " * 8)
                    + self._lines(self.sec["formula"], "id", " " * 8) + "    }\n")
        return (head + self._cuda_flag("    ") + body + "}\n\n"
                f"const char *nl_cu_{self.name}(cudaStream_t stream, {params})\n{{\n"
                f"    NL_CU_LAUNCH({self.name}_kernel, {count}, stream, "
                f"{', '.join(self._names())});\n}}\n")

    def _cuda_flag(self, indent):
        return (f"{indent}const int overwrite = {self.row.overwrite};\n" if self.uses_overwrite
                else "")

    def _cuda_reduction(self):
        """A reduction as kernels/cuda/common.cuh's blocks do them (nl_cu_geo): a block's
        lanes sum a result's values, the tree folds them; then the store (and a slice's
        formula, over the fiber again, by the same lanes). A row without a formula may be cut
        in chunks over blocks: then the first kernel writes its chunk's sums to the workspace
        and ``<name>_finish`` adds them in order and stores."""
        params = ", ".join(self.c_params())
        names = ", ".join(self._names())
        slice_ = self.kind == "slice"
        ns, sums = len(self.sums), self.sums
        entry = "e" if slice_ else "j"
        mn = "    const int64_t mn = m * n;\n" if "mn" in self.indices else ""
        decls, stores = self._split_store()
        chunked = not self.sec["formula"]
        acc_words = self._words("accumulate")
        if slice_:
            at = ("        const int64_t nl_fiber = e / n * k * n + e % n;   /* x[i, 0, l] */\n"
                  + self._lines(self.sec["per_slice"], "", " " * 8))
            walk = ("        for (int64_t j = nl_s * G.chunk + nl_q; nl_on && j < nl_end; "
                    "j += G.lanes) {\n            const int64_t id = nl_fiber + j * n;\n")
        else:
            at = ""
            walk = ("        for (int64_t nl_t = nl_s * G.chunk + nl_q; nl_on && nl_t < nl_end; "
                    "nl_t += G.lanes) {   /* nl_t = i·n + l */\n"
                    + ("            const int64_t e = nl_t;\n" if "e" in acc_words else "")
                    + "            const int64_t id = n == 1 ? nl_t * k + j "
                    ": (nl_t / n * k + j) * n + nl_t % n;\n")
        red = lambda v: f"nl_red[{v} * NL_CU_RED + nl_q * G.per + nl_r]"   # noqa: E731
        body = (f"    __shared__ nl_acc nl_red[{ns} * NL_CU_RED];\n"
                "    const int nl_r = nl_cu_result(G), nl_q = nl_cu_lane(G);\n" + mn
                + self._cuda_flag("    ")
                + "    for (int64_t nl_g = blockIdx.x; nl_g < G.groups; nl_g += gridDim.x) {\n"
                "        const int64_t nl_at = nl_g / G.split * G.per + nl_r, "
                "nl_s = nl_g % G.split;\n"
                "        const int nl_on = nl_at < G.entries;\n"
                f"        const int64_t {entry} = nl_on ? nl_at : 0;   /* past the tile: reads "
                "entry 0, stores nothing */\n" + at
                + "".join(f"        nl_acc {v} = 0;\n" for v in sums)
                + "        const int64_t nl_end = nl_cu_chunk_end(G, nl_s);\n" + walk
                + self._lines(self.sec["accumulate"], "id", " " * 12) + "        }\n"
                + "".join(f"        {red(i)} = {v};\n" for i, v in enumerate(sums))
                + f"        nl_cu_fold<NL_CU_SUM>(nl_red, {ns}, G, nl_q, nl_r);\n"
                + "".join(f"        {v} = nl_red[{i} * NL_CU_RED + nl_r];\n"
                          for i, v in enumerate(sums)))
        finish = (self._lines(decls, "", " " * 12) + "            if (nl_on && nl_q == 0) {\n"
                  + self._lines(stores, "", " " * 16) + "            }\n")
        if self.sec["formula"]:
            finish += ("            for (int64_t j = nl_q; nl_on && j < k; j += G.lanes) {\n"
                       "                const int64_t id = nl_fiber + j * n;\n"
                       + self._lines(self.sec["formula"], "id", " " * 16) + "            }\n")
        if chunked:
            body += ("        if (G.split > 1) {   /* a chunk's sums, for the finish */\n"
                     "            if (nl_on && nl_q == 0) {\n"
                     + "".join(f"                nl_ws[({i} * G.split + nl_s) * G.entries + "
                               f"{entry}] = {v};\n" for i, v in enumerate(sums))
                     + "            }\n        } else {\n" + finish + "        }\n")
        else:
            body += "        {\n" + finish + "        }\n"
        body += ("        __syncthreads();   /* nl_red read by all before the next group's "
                 "sums */\n    }\n")
        kernel = (f"/* {self.row.doc} */\n__global__ static void {self.name}_kernel(const struct "
                  f"nl_cu_geo G, nl_acc *nl_ws, {params})\n{{\n"
                  + ("" if chunked else "    (void)nl_ws;\n") + body + "}\n\n")
        if slice_:
            entries, length, contiguous = "m * n", "k", "n == 1"
        else:
            entries, length, contiguous = "k", "m * n", "n > 1"
        host = (f"const char *nl_cu_{self.name}(cudaStream_t stream, {params})\n{{\n"
                "    nl_acc *nl_ws = NULL;\n"
                f"    const struct nl_cu_geo G = nl_cu_geometry({entries}, {length}, "
                f"{contiguous}, {ns}, {'&nl_ws' if chunked else 'NULL'});\n"
                "    if (G.entries <= 0) return NULL;\n"
                f"    NL_CU_RUN_COOP({self.name}_kernel, G, stream, G, nl_ws, {names});\n")
        if not chunked:
            return kernel + host + "    return nl_cu_launched();\n}\n"
        # the finish: one thread per result, its chunks' sums added in order, then the store
        # (with the slice's per_slice locals the store reads)
        store_words = self._words("store")
        ps = [st for st in self.sec["per_slice"]
              if set(_declared(st)) & store_words] if slice_ else []
        unused = [n for st in ps for n in _declared(st) if n not in store_words]
        fin = (f"__global__ static void {self.name}_finish(const struct nl_cu_geo G, "
               f"const nl_acc *nl_ws, {params})\n{{\n" + mn + self._cuda_flag("    ")
               + f"    NL_CU_FOR({entry}, G.entries) {{\n"
               + self._lines(ps, "", " " * 8) + "".join(f"        (void){n};\n" for n in unused)
               + "".join(f"        nl_acc {v} = 0;\n" for v in sums)
               + "        for (int64_t nl_s = 0; nl_s < G.split; nl_s++) {\n"
               + "".join(f"            {v} += nl_ws[({i} * G.split + nl_s) * G.entries + "
                         f"{entry}];\n" for i, v in enumerate(sums))
               + "        }\n" + self._lines(self.sec["store"], "", " " * 8) + "    }\n}\n\n")
        return (kernel + fin + host
                + "    const char *err = nl_cu_launched();\n"
                "    if (err || G.split == 1) return err;\n"
                f"    NL_CU_LAUNCH({self.name}_finish, G.entries, stream, G, nl_ws, {names});\n"
                "}\n")


def kernels(rows):
    """The Kernel of every formula row, in table order."""
    known = helpers()
    return [Kernel(r, known) for r in rows if r.formula or r.reduce]


HEADER = ("/* Generated by kernels/build.py from the formulas of kernels/codelets.py (kernels/"
          "formulas.py): do not edit. */\n")


def c_file(rows):
    """kernels/cpu/formulas.c"""
    return (HEADER + '#include "prototypes.h"\n#include <stdint.h>\n\n#include "axis.h"\n'
            '#include "formula.h"\n\n' + "\n".join(k.c_source() for k in kernels(rows)))


def opencl_kernels(rows):
    """The formula rows' OpenCL kernels, for the program (after kernels/formula.h)."""
    return HEADER + "\n".join(k.ocl_source() for k in kernels(rows))


def cuda_file(rows):
    """kernels/cuda/formulas.cu"""
    return (HEADER + '#include "common.cuh"\n#include "../formula.h"\n\n'
            + "\n".join(k.cuda_source() for k in kernels(rows)))
