#!/usr/bin/env bash
# Build StarPU 1.3 with CUDA (and OpenCL) from Debian's own source package into PREFIX, then
# rebuild nntile_lab against it, for a machine with an NVIDIA GPU (Debian's libstarpu is built
# without CUDA: Runtime(ncuda=1) says so and points here). docs/accelerators.md, "CUDA".
#
#   scripts/build_starpu_cuda.sh [options] PREFIX
#     --cuda DIR       the CUDA toolkit (bin/nvcc, include/, lib64/ with cudart and cuBLAS);
#                      default $CUDA_HOME, else /usr/local/cuda
#     --maxcpus N      CPU workers the build allows (Debian's: 4); default: this machine's cores
#     --jobs N         parallel make jobs (default: the cores)
#     --work DIR       where the source is fetched and built (default PREFIX/src)
#     --no-rebuild     build and install StarPU only; do not rebuild nntile_lab
#     --print-configure  print StarPU's configure line for these options and stop
#     --portable       for a StarPU carried to another machine (scripts/gpu_check.sh's bundle):
#                      no OpenCL, MPI or GLPK (libraries that machine may lack); CUDA,
#                      cuBLAS and hwloc only
#
# The source is `apt-get source starpu` of the version installed (or the candidate), fetched
# with a private deb-src list beside the machine's own Debian mirrors (the system's apt
# configuration is left untouched); dpkg-source applies Debian's patches. Nothing is
# downloaded from anywhere else. Needs a C compiler, autoconf/automake/libtool (Debian's
# patches touch Makefile.am) and hwloc; missing Debian packages are installed, as
# scripts/setup.sh does. Afterwards: STARPU_PREFIX=PREFIX is what kernels/build.py reads.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() { sed -n '6,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "build_starpu_cuda: $*" >&2; exit 2; }

cuda=${CUDA_HOME:-/usr/local/cuda}
cores=$(nproc)
maxcpus=$cores
jobs=$cores
work=""
rebuild=1
print_only=0
portable=0
prefix=""
while (($#)); do
    case "$1" in
        --cuda) [ $# -ge 2 ] || die "--cuda needs a directory"; cuda=$2; shift 2 ;;
        --maxcpus) [ $# -ge 2 ] || die "--maxcpus needs a number"; maxcpus=$2; shift 2 ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
        --work) [ $# -ge 2 ] || die "--work needs a directory"; work=$2; shift 2 ;;
        --no-rebuild) rebuild=0; shift ;;
        --print-configure) print_only=1; shift ;;
        --portable) portable=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option '$1' (see --help)" ;;
        *) [ -z "$prefix" ] || die "one PREFIX only (got '$prefix' and '$1')"; prefix=$1; shift ;;
    esac
done
[ -n "$prefix" ] || die "give the install PREFIX, e.g. scripts/build_starpu_cuda.sh \$HOME/starpu-cuda"
for v in maxcpus jobs; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v '${!v}' must be a whole number ≥ 1"
done
((maxcpus <= 512)) || die "--maxcpus $maxcpus is more than StarPU 1.3 can take (512)"
# the toolkit: nvcc, the runtime, cuBLAS (StarPU's configure links them)
[ -x "$cuda/bin/nvcc" ] || die "no nvcc in '$cuda/bin': give the CUDA toolkit with --cuda DIR (or CUDA_HOME)"
[ -e "$cuda/include/cuda_runtime.h" ] || die "'$cuda/include' has no cuda_runtime.h: --cuda must name a whole CUDA toolkit"
cudalib=""
for sub in lib64 lib; do [ -e "$cuda/$sub/libcudart.so" ] && cudalib=$cuda/$sub && break; done
[ -n "$cudalib" ] || die "no libcudart.so in '$cuda/lib64' or '$cuda/lib': --cuda must name a whole CUDA toolkit"
[ -e "$cuda/include/cublas_v2.h" ] && [ -e "$cudalib/libcublas.so" ] \
    || die "cuBLAS is missing from '$cuda' (include/cublas_v2.h, $cudalib/libcublas.so): install the toolkit's cuBLAS (NVIDIA's libcublas-dev-* package or the full toolkit)"
[ -e "$cuda/include/cusparse.h" ] \
    || die "cuSPARSE's header is missing from '$cuda/include' (StarPU's headers include it): install the toolkit's cuSPARSE (libcusparse-dev-*) or the full toolkit"

mkdir -p "$prefix" 2>/dev/null || die "PREFIX '$prefix' cannot be created: give a writable directory"
prefix=$(cd "$prefix" && pwd)
work=${work:-$prefix/src}

mpi=--disable-mpi
command -v mpicc >/dev/null && mpi=""   # StarPU-MPI as Debian builds it, when Open MPI is there
opencl=--enable-opencl
extra=()
if ((portable)); then
    # what another machine may lack: the OpenCL ICD loader, Open MPI, GLPK (libstarpu then
    # needs only libc, hwloc and the CUDA libraries)
    opencl=--disable-opencl
    mpi=--disable-mpi
    extra=(--disable-glpk)
fi
# Debian's own configure switches (debian/rules) that matter here, CUDA on, and no docs,
# examples, tests or Fortran: the library and its tools only
configure=(./configure --prefix="$prefix" --enable-cuda --with-cuda-dir="$cuda"
           --with-cuda-lib-dir="$cudalib" "$opencl" --enable-maxcpus="$maxcpus"
           --enable-openmp --disable-build-doc --disable-build-examples --disable-build-tests
           --disable-fortran --disable-opengl-render $mpi "${extra[@]}"
           NVCCFLAGS="-Xcompiler -fPIC"
           # libstarpu finds cudart and cuBLAS where they are, ld.so.conf or not (and so does
           # the linker of StarPU's own tools, through libstarpu's rpath)
           LDFLAGS="-Wl,-rpath,$cudalib")
if ((print_only)); then
    echo "${configure[@]@Q}"   # each word quoted as the shell reads it back
    exit 0
fi

missing=()
for tool in dpkg-source:dpkg-dev autoreconf:autoconf automake:automake libtoolize:libtool \
            make:make gcc:gcc g++:g++ pkg-config:pkg-config patch:patch; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool##*:}")
done
pkg-config --exists hwloc 2>/dev/null || missing+=(libhwloc-dev)
[ -e /usr/include/CL/cl.h ] || missing+=(opencl-headers)
pkg-config --exists OpenCL 2>/dev/null || missing+=(ocl-icd-opencl-dev)
if ((${#missing[@]})); then
    echo "build_starpu_cuda: installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

# Debian's source package, through a private deb-src list of the machine's own mirrors
version=$(dpkg-query -W -f='${Version}' libstarpu-dev 2>/dev/null || true)
[ -n "$version" ] || version=$(apt-cache policy libstarpu-dev | awk '/Candidate:/ {print $2}')
[ -n "$version" ] && [ "$version" != "(none)" ] \
    || die "apt knows no libstarpu-dev (StarPU 1.3): this needs Debian 12 (bookworm) or newer"
apt_dir=$work/apt
mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
{
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed 's/^Types: .*/Types: deb-src/'
} >"$apt_dir/sources/src.sources"
grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    | sed 's/^deb /deb-src /' >"$apt_dir/sources/src.list" || true
apt_opts=(-o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$apt_dir/sources"
          -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache")
echo "build_starpu_cuda: fetching Debian's source of starpu $version into $work"
apt-get -q "${apt_opts[@]}" update >/dev/null
rm -rf "$work"/starpu-1.3*   # a fresh tree: the patch below applies once
(cd "$work" && apt-get -q "${apt_opts[@]}" source "starpu=$version" >/dev/null)
src=$(find "$work" -maxdepth 1 -type d -name 'starpu-1.3*' | sort | tail -1)
[ -n "$src" ] || die "apt-get source starpu=$version left no starpu-1.3* folder in $work"
# StarPU 1.3 predates CUDA 12: its cuBLAS includes and a removed device property need the
# small fix in scripts/starpu-1.3-cuda12.patch (what it changes and why: its header)
cuda_major=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
[[ $cuda_major =~ ^[0-9]+$ ]] || die "cannot read the CUDA version from '$cuda/bin/nvcc --version'"
if ((cuda_major >= 12)); then
    echo "build_starpu_cuda: CUDA $cuda_major: applying scripts/starpu-1.3-cuda12.patch"
    patch -d "$src" -p1 --forward --quiet <"$repo/scripts/starpu-1.3-cuda12.patch" \
        || die "scripts/starpu-1.3-cuda12.patch does not apply to Debian's starpu $version"
fi

# Debian's build regenerates the autotools files (its patches touch Makefile.am)
echo "build_starpu_cuda: configuring $src with CUDA from $cuda"
cd "$src"
autoreconf -fi >/dev/null 2>&1
"${configure[@]}" >"$work/configure.log" 2>&1 \
    || { tail -30 "$work/configure.log"; die "configure failed: $work/configure.log"; }
grep -q '^#define STARPU_USE_CUDA 1' include/starpu_config.h \
    || die "configure did not enable CUDA (see CUDA lines in $work/configure.log)"
echo "build_starpu_cuda: building (make -j$jobs; logs in $work/make.log)"
make -j"$jobs" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; die "make failed: $work/make.log"; }
make install >>"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; die "make install failed"; }
echo "build_starpu_cuda: StarPU with CUDA installed in $prefix"

if ((rebuild)); then
    cd "$repo"
    [ -x .venv/bin/python ] || die "no .venv here: run scripts/setup.sh first, then STARPU_PREFIX=$prefix .venv/bin/python -m pip install --no-build-isolation --no-deps -e ."
    echo "build_starpu_cuda: rebuilding nntile_lab against it (STARPU_PREFIX=$prefix)"
    STARPU_PREFIX=$prefix .venv/bin/python -m pip install -q --no-build-isolation --no-deps -e .
    .venv/bin/python -c "from nntile_lab._lib import lib; assert lib.nl_cuda_built(), \
'nntile_lab was not built against the StarPU in $prefix'; \
from nntile_lab.runtime import cuda_devices; print('nntile_lab: CUDA devices:', cuda_devices())"
    echo "build_starpu_cuda: done. Run the GPU tests: .venv/bin/python -m pytest -m cuda"
fi
