"""Compile the CUDA kernels (kernels/cuda/*.cu) with nvcc, and link them with cuBLAS.

Two uses:
  * kernels/build.py, against a StarPU built with CUDA (``STARPU_USE_CUDA``): the objects
    go into the extension, whose generated codelets then carry ``cuda_funcs``;
  * the check that keeps them from rotting where no StarPU with CUDA and no GPU exist (CI,
    tests/kernels/test_cuda_build.py): ``python kernels/cuda_build.py --out DIR`` compiles
    every .cu file, links the objects with the CUDA runtime and cuBLAS into a shared object
    with ``--no-undefined`` (every symbol must resolve), and compiles the generated codelet
    glue with ``STARPU_USE_CUDA`` defined against StarPU's headers.

Where the tools come from: nvcc from ``$CUDA_HOME``/``$CUDA_PATH``, ``PATH`` or
/usr/local/cuda, else PyPI's ``nvidia-cuda-nvcc`` in this Python; cuBLAS's headers and
library from the CUDA toolkit, else PyPI's ``nvidia-cublas`` (scripts/setup.sh installs
what is missing).
"""
import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_DIR = os.path.join(HERE, "cuda")
# Ampere (A100), Hopper (H100/H200): the GPUs this is meant for; more with --arch
DEFAULT_ARCHS = ("sm_80", "sm_90")


class CudaToolMissing(RuntimeError):
    """nvcc, the CUDA runtime or cuBLAS is not found; the message names what to install."""


def _wheel_roots():
    """The NVIDIA wheels' prefixes in this Python (``site-packages/nvidia/cu13`` and the
    like), newest CUDA first."""
    roots = []
    for sp in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        roots += sorted(glob.glob(os.path.join(sp, "nvidia", "cu*")), reverse=True)
        roots += [d for d in glob.glob(os.path.join(sp, "nvidia", "*"))
                  if os.path.isdir(os.path.join(d, "include"))]
    return roots


def cuda_home():
    """The CUDA toolkit's prefix (bin/nvcc, include/cuda_runtime.h)."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates += ["/usr/local/cuda", *_wheel_roots()]
    # a prefix with both nvcc and the runtime's headers first (PATH's nvcc may be a wrapper
    # script in /usr/local/bin), then one with nvcc alone (PyPI's wheels split them)
    roots = [r for r in filter(None, candidates) if os.access(os.path.join(r, "bin", "nvcc"),
                                                              os.X_OK)]
    for root in roots:
        if os.path.exists(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    if roots:
        return roots[0]
    raise CudaToolMissing(
        "no nvcc found (looked in $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda and this "
        "Python's nvidia packages): install the CUDA toolkit, or (one release for all) "
        "`pip install nvidia-cuda-nvcc==13.0.* nvidia-cuda-crt==13.0.* nvidia-nvvm==13.0.* "
        "nvidia-cuda-runtime==13.0.* nvidia-cuda-cccl==13.0.*` (scripts/setup.sh test does)")


def _find(name, roots, sub):
    for root in roots:
        path = os.path.join(root, sub, name)
        if os.path.exists(path):
            return os.path.join(root, sub)
    return None


def cuda_paths():
    """(nvcc, include dirs, link args) for the kernels: the toolkit's runtime, and cuBLAS
    from the toolkit or from PyPI's nvidia-cublas (whose library has no unversioned
    link name, hence the full path)."""
    home = cuda_home()
    roots = [home, *_wheel_roots()]
    runtime_inc = _find("cuda_runtime.h", roots, "include")
    cublas_inc = _find("cublas_v2.h", roots, "include")
    if runtime_inc is None:
        raise CudaToolMissing(f"nvcc is in {home} but cuda_runtime.h is not: "
                              "`pip install nvidia-cuda-runtime`, or a full CUDA toolkit")
    if cublas_inc is None:
        raise CudaToolMissing("cuBLAS's headers (cublas_v2.h) are missing: "
                              "`pip install nvidia-cublas` (scripts/setup.sh test does), or "
                              "the CUDA toolkit's libcublas-dev")
    link = []
    for lib, name, wheel in (("cudart", "libcudart.so", "nvidia-cuda-runtime"),
                             ("cublas", "libcublas.so", "nvidia-cublas")):
        found = None
        for root in roots:
            for sub in ("lib64", "lib"):
                hits = sorted(glob.glob(os.path.join(root, sub, name + "*")))
                if hits:
                    found = (root, sub, hits)
                    break
            if found:
                break
        if not found:
            raise CudaToolMissing(f"lib{lib} not found beside {home} or in this Python's "
                                  f"nvidia packages: `pip install {wheel}`")
        root, sub, hits = found
        libdir = os.path.join(root, sub)
        plain = os.path.join(libdir, name)
        link += [f"-L{libdir}", f"-Wl,-rpath,{libdir}",
                 f"-l{lib}" if os.path.exists(plain) else f"-l:{os.path.basename(hits[0])}"]
    return os.path.join(home, "bin", "nvcc"), sorted({runtime_inc, cublas_inc}), link


def use_starpu_prefix():
    """STARPU_PREFIX: build against the StarPU installed there (scripts/build_starpu_cuda.sh
    makes one with CUDA), found through its pkg-config files (PKG_CONFIG_PATH), and load it
    from there: the link arguments for that (an rpath), [] without STARPU_PREFIX."""
    prefix = os.environ.get("STARPU_PREFIX")
    if not prefix:
        return []
    pc = [d for d in (os.path.join(prefix, sub, "pkgconfig") for sub in ("lib", "lib64"))
          if os.path.exists(os.path.join(d, "starpu-1.3.pc"))]
    if not pc:
        raise ValueError(f"STARPU_PREFIX={prefix}: no lib/pkgconfig/starpu-1.3.pc there; give "
                         "the --prefix StarPU 1.3 was installed to "
                         "(scripts/build_starpu_cuda.sh PREFIX)")
    os.environ["PKG_CONFIG_PATH"] = os.pathsep.join(
        pc + [p for p in [os.environ.get("PKG_CONFIG_PATH")] if p])
    libdir = os.path.dirname(pc[0])
    return [f"-Wl,-rpath,{libdir}"]


def starpu_has_cuda(cflags):
    """Whether the StarPU built against was configured with CUDA (its starpu_config.h
    defines STARPU_USE_CUDA; Debian's does not)."""
    for inc in (f[2:] for f in cflags if f.startswith("-I")):
        path = os.path.join(inc, "starpu_config.h")
        if os.path.exists(path):
            with open(path) as f:
                return any(line.split()[:2] == ["#define", "STARPU_USE_CUDA"] for line in f)
    return False


def _run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"failed ({done.returncode}): {shlex.join(cmd)}\n"
                           f"{done.stdout}{done.stderr}")
    return done


def write_generated():
    """kernels/cuda/prototypes.h and formulas.cu (the kernels of the table's formula rows)
    from the codelet table, as build.py writes cpu/'s."""
    sys.path.insert(0, HERE)
    import codegen
    import formulas
    for name, text in (("prototypes.h", codegen.generate_cuda_prototypes()),
                       ("formulas.cu", formulas.cuda_file(codegen.CODELETS))):
        path = os.path.join(CUDA_DIR, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def compile_objects(out_dir, archs=DEFAULT_ARCHS, jobs=2):
    """Every kernels/cuda/*.cu into out_dir/<name>.o, for each of archs (SASS each, plus
    PTX of the last for newer GPUs). Returns the object paths."""
    write_generated()
    nvcc, incs, _ = cuda_paths()
    gencode = []
    for arch in archs:
        gencode += ["-gencode", f"arch=compute_{arch[3:]},code={arch}"]
    gencode += ["-gencode", f"arch=compute_{archs[-1][3:]},code=compute_{archs[-1][3:]}"]
    os.makedirs(out_dir, exist_ok=True)
    sources = sorted(glob.glob(os.path.join(CUDA_DIR, "*.cu")))
    procs, objects = [], []
    for src in sources:
        obj = os.path.join(out_dir, os.path.basename(src)[:-3] + ".o")
        cmd = [nvcc, "-O3", "-std=c++17", "-Xcompiler", "-fPIC,-Wall", "--Werror",
               "all-warnings", *gencode, *[f"-I{d}" for d in incs], "-c", src, "-o", obj]
        while len([p for p in procs if p[0].poll() is None]) >= jobs:
            procs[0][0].wait()
        procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True), cmd))
        objects.append(obj)
    failed = []
    for proc, cmd in procs:
        out = proc.communicate()[0]
        if proc.returncode:
            failed.append(f"{shlex.join(cmd)}\n{out}")
    if failed:
        raise RuntimeError("nvcc failed:\n" + "\n".join(failed))
    return objects


def link_shared(objects, out):
    """The objects + the CUDA runtime + cuBLAS as one shared object, with every symbol
    resolved (``--no-undefined``): a kernel calling a function that does not exist fails
    here, not on a user's GPU."""
    nvcc, _, link = cuda_paths()
    args = []
    for a in link:   # gcc's -Wl,X is nvcc's -Xlinker X
        args += ["-Xlinker", a[4:]] if a.startswith("-Wl,") else [a]
    _run([nvcc, "-shared", "-o", out, *objects, "-Xlinker", "--no-undefined", *args])
    return out


def build_emulation(out_dir):
    """The kernels compiled for the host (g++, NL_CU_EMULATE: kernels/cuda/emulate.h) into
    out_dir/libnl_cuda_emulated.so, with ``nl_cu_call_op`` to call each cuda="kernel" row by
    op id: tests/kernels/test_cuda_emulated.py runs them against the C kernels. cuBLAS's
    rows (gemm.cu) are left out. Returns the path."""
    write_generated()
    sys.path.insert(0, HERE)
    import codegen
    os.makedirs(out_dir, exist_ok=True)
    switch = os.path.join(out_dir, "call_op.cu")
    with open(switch, "w") as f:
        f.write(codegen.generate_cuda_emulation_switch())
    sources = [s for s in sorted(glob.glob(os.path.join(CUDA_DIR, "*.cu")))
               if os.path.basename(s) != "gemm.cu"] + [switch]
    out = os.path.join(out_dir, "libnl_cuda_emulated.so")
    _run([os.environ.get("CXX", "g++"), "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall",
          "-Werror", "-pthread", "-DNL_CU_EMULATE", f"-I{CUDA_DIR}", "-x", "c++", *sources,
          "-o", out])
    return out


def starpu_cflags():
    return shlex.split(subprocess.run(["pkg-config", "--cflags", "starpu-1.3"], check=True,
                                      capture_output=True, text=True).stdout)


def check_glue():
    """Compile the generated codelets and the runtime glue (kernels/runtime/) with
    STARPU_USE_CUDA defined against StarPU's headers (syntax and types: the cuda_funcs, the
    calls of nl_cu_*, starpu_cuda_get_local_stream, starpu_cublas_*), as a StarPU built
    with CUDA would see them. Needs no StarPU with CUDA: Debian's headers declare the CUDA
    API under that macro. (Linking them needs that StarPU: scripts/build_starpu_cuda.sh.)"""
    sys.path.insert(0, HERE)
    import codegen
    _, incs, _ = cuda_paths()
    with tempfile.TemporaryDirectory() as tmp:
        # starpu.h includes cuSPARSE's header under STARPU_USE_CUDA, for one handle type;
        # the codelets use no cuSPARSE, and a toolkit without it (nvcc + cuBLAS alone) gets
        # that type from a stand-in, as cusparse.h itself declares it
        if not any(os.path.exists(os.path.join(d, "cusparse.h")) for d in incs):
            with open(os.path.join(tmp, "cusparse.h"), "w") as f:
                f.write("typedef struct cusparseContext *cusparseHandle_t;\n")
        src = os.path.join(tmp, "glue.c")
        with open(src, "w") as f:
            f.write('#include <starpu.h>\n#include "api.h"\n' + codegen.generate_c())
        for path in [src] + sorted(glob.glob(os.path.join(HERE, "runtime", "*.c"))):
            # -Wno-comment: runtime/init.c's comment names kernels/opencl/*.cl
            _run([os.environ.get("CC", "gcc"), "-fsyntax-only", "-std=gnu11", "-Wall",
                  "-Werror", "-Wno-unused-function", "-Wno-comment", "-DSTARPU_USE_CUDA",
                  f"-I{HERE}", *[f"-I{d}" for d in incs], f"-I{tmp}", *starpu_cflags(), path])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the objects and the .so")
    ap.add_argument("--arch", default=",".join(DEFAULT_ARCHS),
                    help="comma list of GPU architectures (default %(default)s)")
    args = ap.parse_args(argv)
    archs = tuple(a.strip() for a in args.arch.split(",") if a.strip())
    if not archs or any(not (a.startswith("sm_") and a[3:].isdigit()) for a in archs):
        ap.error(f"--arch {args.arch!r}: give architectures like sm_80,sm_90")
    try:
        objects = compile_objects(args.out, archs)
        so = link_shared(objects, os.path.join(args.out, "libnl_cuda.so"))
        check_glue()
    except CudaToolMissing as exc:
        print(f"cuda_build: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"cuda_build: {exc}", file=sys.stderr)
        return 1
    print(f"cuda_build: {len(objects)} CUDA sources compiled for {', '.join(archs)}, "
          f"linked with cuBLAS into {so}; codelet glue compiles with STARPU_USE_CUDA")
    return 0


if __name__ == "__main__":
    sys.exit(main())
