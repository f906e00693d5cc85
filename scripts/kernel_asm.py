"""Which C kernels compile to the same machine code in another revision as in this checkout:
each ``nl_*`` kernel of kernels/cpu/*.c (the generated formulas.c included) compiled as the
build does (-O3, the value-safe flags) for x86-64-v3 and -v4, its instructions compared with
labels and debug directives left out.

    .venv/bin/python scripts/kernel_asm.py [REV]      (default: main)

Identical machine code runs at identical speed: a change to kernels/ (a refactor of how the
kernels are written or generated) then needs timing only for the kernels it lists as
different. REV's generated sources (prototypes.h, formulas.c) are made by REV's own
generator; this checkout's must be built (scripts/setup.sh, pip install -e .).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-O3", "-std=gnu11", "-fno-trapping-math", "-fno-math-errno"]


def _generate(kernels: str) -> None:
    """REV's generated C sources, by REV's generator (its own table and codegen)."""
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import codegen\n"
            "open(os.path.join(sys.argv[1], 'cpu', 'prototypes.h'), 'w')"
            ".write(codegen.generate_prototypes())\n"
            "if os.path.exists(os.path.join(sys.argv[1], 'formulas.py')):\n"
            "    import formulas\n"
            "    open(os.path.join(sys.argv[1], 'cpu', 'formulas.c'), 'w')"
            ".write(formulas.c_file(codegen.CODELETS))\n")
    subprocess.run([sys.executable, "-c", code, kernels], check=True)


def bodies(kernels: str, march: str) -> dict[str, list[str]]:
    """name -> instructions of every nl_* function of kernels/cpu/*.c"""
    import scipy_openblas32
    starpu = subprocess.run(["pkg-config", "--cflags", "starpu-1.3"], check=True,
                            capture_output=True, text=True).stdout.split()
    out = {}
    for f in sorted(os.listdir(os.path.join(kernels, "cpu"))):
        if not f.endswith(".c"):
            continue
        asm = subprocess.run(["gcc", "-S", *FLAGS, f"-march={march}", "-I", kernels, "-I",
                              os.path.join(kernels, "cpu"), "-I",
                              scipy_openblas32.get_include_dir(), *starpu,
                              os.path.join(kernels, "cpu", f), "-o", "-"],
                             check=True, capture_output=True, text=True).stdout
        for name, body in re.findall(r"^(nl_\w+):\n(.*?)\.size\s+\1", asm, re.M | re.S):
            lines = [ln.strip() for ln in body.splitlines()]
            lines = [re.sub(r"\.L\w+", ".L", ln) for ln in lines
                     if ln and not ln.startswith((".cfi", ".p2align", ".loc"))
                     and not re.match(r"^\.L\w+:$", ln)]
            out[name] = lines
    return out


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else "main"
    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, "rev.tar")
        subprocess.run(["git", "-C", ROOT, "archive", "-o", archive, rev, "kernels"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        old_kernels = os.path.join(tmp, "kernels")
        _generate(old_kernels)
        for march in ("x86-64-v3", "x86-64-v4"):
            old, new = bodies(old_kernels, march), bodies(os.path.join(ROOT, "kernels"), march)
            both = sorted(set(old) & set(new))
            same = [n for n in both if old[n] == new[n]]
            diff = [n for n in both if old[n] != new[n]]
            print(f"{march}: {len(both)} kernels in both, {len(same)} with identical machine "
                  f"code, {len(diff)} different")
            print("  identical: " + " ".join(n[3:] for n in same))
            print("  different: " + " ".join(f"{n[3:]} ({len(old[n])} -> {len(new[n])} "
                                             "instructions)" for n in diff))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
