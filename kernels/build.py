"""cffi (API mode) build of nntile_lab._ext: the runtime glue, the C kernels and
the codelets generated from codelets.py, against Debian's StarPU 1.3 and
scipy-openblas32 (a BLAS that is safe when several workers call it at once).

One module per CPU variant (nntile_lab/cpu_variant.py: x86-64-v4 and x86-64-v3, or the
flags in NNTILE_LAB_CFLAGS): ``ffibuilder_<name>`` each, listed by setup.py."""
import glob
import json
import os
import shlex
import subprocess
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import codegen  # noqa: E402
import cuda_build  # noqa: E402
import formulas  # noqa: E402

# the variant table is the package's (pure Python, no extension needed to read it)
sys.path.insert(0, os.path.dirname(HERE))
from nntile_lab.cpu_variant import build_variants  # noqa: E402


def _pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "starpu-1.3"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            "nntile_lab needs StarPU 1.3 and pkg-config: on Debian/Ubuntu run\n"
            "  apt-get install libstarpu-dev pkg-config\n"
            f"(pkg-config starpu-1.3 failed: {exc})") from exc
    return shlex.split(out)


def _mpi_flags():
    """(include dirs, link args) of Open MPI + StarPU-MPI, or None without MPI headers
    (then the extension has no distributed mode: kernels/mpi.c reports -ENOSYS)."""
    if os.environ.get("NNTILE_LAB_NO_MPI") == "1":
        return None
    try:
        inc = subprocess.run(["mpicc", "--showme:incdirs"], check=True, capture_output=True,
                             text=True).stdout.split()
        libs = shlex.split(subprocess.run(["mpicc", "--showme:link"], check=True,
                                          capture_output=True, text=True).stdout)
        mpi = shlex.split(subprocess.run(["pkg-config", "--libs", "starpumpi-1.3"], check=True,
                                         capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError):
        print("build: no mpicc / starpumpi-1.3: building without StarPU-MPI "
              "(apt-get install libopenmpi-dev for distributed runs)", file=sys.stderr)
        return None
    return inc, mpi + libs


def _opencl_flags():
    """Link args of the OpenCL worker (ICD loader + CLBlast), or None without their headers
    (then the extension has no OpenCL worker: Runtime(nopencl=N) says how to get one)."""
    if os.environ.get("NNTILE_LAB_NO_OPENCL") == "1":
        return None
    if not all(os.path.exists(h) for h in ("/usr/include/CL/cl.h", "/usr/include/clblast_c.h")):
        print("build: no OpenCL / CLBlast headers: building without the OpenCL worker "
              "(apt-get install ocl-icd-opencl-dev opencl-headers libclblast-dev "
              "pocl-opencl-icd)", file=sys.stderr)
        return None
    return ["-lOpenCL", "-lclblast"]


def _cuda_objects():
    """(objects, link args) of the CUDA kernels (kernels/cuda_build.py), for a StarPU with
    CUDA: the extension's codelets then carry their cuda_funcs."""
    out = os.path.join(os.path.dirname(HERE), "build-cuda")
    archs = tuple(a for a in os.environ.get("NNTILE_LAB_CUDA_ARCHS", "").split(",") if a)
    try:
        objects = cuda_build.compile_objects(out, archs or cuda_build.DEFAULT_ARCHS)
        _, incs, link = cuda_build.cuda_paths()
    except (cuda_build.CudaToolMissing, RuntimeError) as exc:
        raise SystemExit(f"this StarPU has CUDA, so the CUDA kernels are built: {exc}") from exc
    return objects, incs, link


def _openblas_include():
    try:
        import scipy_openblas32
    except ImportError as exc:
        raise SystemExit("nntile_lab needs scipy-openblas32 to build: "
                         "pip install scipy-openblas32") from exc
    return scipy_openblas32.get_include_dir()


def _onednn():
    """(include dirs, link args) of oneDNN, the bf16 GEMM (kernels/cpu/gemm_bf16.c): Debian's
    libdnnl-dev has no pkg-config file, so look where it and conda-forge's onednn install
    (``DNNLROOT`` first); the library runs on OpenMP (libgomp)."""
    for root in (os.environ.get("DNNLROOT"), os.environ.get("CONDA_PREFIX"), "/usr/local",
                 "/usr"):
        if root and os.path.exists(os.path.join(root, "include", "oneapi", "dnnl", "dnnl.h")):
            if root == "/usr":   # the compiler's own directories
                return [], ["-ldnnl", "-lgomp"]
            lib = os.path.join(root, "lib")
            return [os.path.join(root, "include")], [f"-L{lib}", f"-Wl,-rpath,{lib}", "-ldnnl",
                                                     "-lgomp"]
    raise SystemExit("nntile_lab needs oneDNN for its bf16 GEMM: on Debian/Ubuntu run\n"
                     "  apt-get install libdnnl-dev\n(scripts/setup.sh does), with conda "
                     "`conda install -c conda-forge onednn`, or set DNNLROOT to its prefix")


def _read(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


# every kernel file includes this: the compiler checks each kernel's signature
# against its row in the table (generated, not committed)
with open(os.path.join(HERE, "cpu", "prototypes.h"), "w") as f:
    f.write(codegen.generate_prototypes())
# the C kernels of the table's formula rows (generated, not committed; their OpenCL
# kernels go into the program's source, their CUDA ones into cuda/formulas.cu)
with open(os.path.join(HERE, "cpu", "formulas.c"), "w") as f:
    f.write(formulas.c_file(codegen.CODELETS))

# the element-wise ops' Python tile loops, from the same table, into the package (not
# committed): an installed wheel carries them, kernels/ need not be importable there
_generated = os.path.join(HERE, os.pardir, "nntile_lab", "ops", "_generated.py")
with open(_generated + ".tmp", "w") as f:
    f.write(codegen.generate_python())
os.replace(_generated + ".tmp", _generated)

# Value-safe math flags, for vectorisation on every x86 ISA (results unchanged, bit for
# bit): nothing here reads floating-point exception flags or errno, so the compiler may
# evaluate a float operation whose result a branch would have discarded
# (-fno-trapping-math) and use the sqrt instruction without a libm fallback that sets
# errno (-fno-math-errno). Without them gcc 12 vectorises the loops around nl_expf
# (GELU, softmax, cross-entropy) only with AVX-512's masked instructions, and AdamW's
# sqrtf on no ISA: with -march=x86-64-v3 (AVX2) they ran scalar, 5-10x slower (BENCHMARKS.md,
# `nntile-lab bench kernels`). Unlike -ffast-math these change no result: no
# reassociation, NaN, infinities and signed zeros as IEEE has them.
VALUE_SAFE = ["-fno-trapping-math", "-fno-math-errno"]

sources = ([os.path.join(HERE, n) for n in ("mpi.c", "bench.c")]
           + sorted(glob.glob(os.path.join(HERE, "runtime", "*.c")))
           + sorted(glob.glob(os.path.join(HERE, "cpu", "*.c"))))
try:
    starpu_rpath = cuda_build.use_starpu_prefix()
except ValueError as exc:
    raise SystemExit(str(exc)) from exc
cflags = _pkg_config("--cflags")
# kernels/cuda/prototypes.h and formulas.cu, from the table: the .cu files and the
# codelets' CUDA glue include the first (generated, not committed)
cuda_build.write_generated()
cuda = _cuda_objects() if cuda_build.starpu_has_cuda(cflags) else None
mpi = _mpi_flags()
opencl = _opencl_flags()
if opencl:
    sources += sorted(glob.glob(os.path.join(HERE, "opencl", "*.c")))
onednn_includes, onednn_link = _onednn()
CDEF = ("typedef struct _starpu_data_state *starpu_data_handle_t;\n"
        + _read("api.h") + codegen.generate_cdef() + _read("starpu_cdef.h"))


def builder(variant: str, arch_flags: str) -> FFI:
    """The cffi builder of ``nntile_lab._ext.<variant>``, compiled with ``arch_flags``."""
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        f"nntile_lab._ext.{variant}",
        '#include <starpu.h>\n#include "api.h"\n' + codegen.generate_c(),
        sources=[os.path.relpath(s) for s in sources],
        include_dirs=[HERE, _openblas_include()] + onednn_includes + (cuda[1] if cuda else [])
        + [f[2:] for f in cflags if f.startswith("-I")] + (mpi[0] if mpi else []),
        # the flags the kernels were built with, for the benchmarks' records (nl_build_cflags)
        define_macros=([("NL_HAVE_MPI", "1")] if mpi else [])
        + ([("NL_HAVE_OPENCL", "1"), ("CL_TARGET_OPENCL_VERSION", "120")] if opencl else [])
        + [("NL_CFLAGS", json.dumps(arch_flags))],
        extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-function"] + VALUE_SAFE
        + shlex.split(arch_flags),
        extra_objects=cuda[0] if cuda else [],
        extra_link_args=(mpi[1] if mpi else []) + (opencl or []) + _pkg_config("--libs")
        + onednn_link + (cuda[2] if cuda else []) + starpu_rpath,
    )
    return ffi


VARIANTS = build_variants()
for _name, _flags in VARIANTS.items():
    globals()[f"ffibuilder_{_name}"] = builder(_name, _flags)

# An in-place build (pip install -e .) must not leave a module of another variant set next to
# the new ones: one built earlier with NNTILE_LAB_CFLAGS would be loaded, with old kernels.
for _stale in glob.glob(os.path.join(os.path.dirname(HERE), "nntile_lab", "_ext", "*.so")):
    if os.path.basename(_stale).split(".")[0] not in VARIANTS:
        os.remove(_stale)

if __name__ == "__main__":
    for _name in VARIANTS:
        globals()[f"ffibuilder_{_name}"].compile(verbose=True)
