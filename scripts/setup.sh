#!/usr/bin/env bash
# Set up nntile_lab on a fresh Debian/Ubuntu machine: the system packages it
# needs (only those missing), a virtual environment in .venv, the package built
# in place. Idempotent; safe to run again after pulling changes to kernels/.
#   scripts/setup.sh          # to train, and JupyterLab ([jupyter])
#   scripts/setup.sh lab      # what every notebook needs: [jupyter,bench,mpi] (PyTorch for 06,
#                             # Open MPI + mpi4py for 08 and 09)
#   scripts/setup.sh test     # every extra ([test]: the above, docs, pytest, Playwright + Debian's
#                             # chromium for the browser test, ...)
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v gcc >/dev/null || missing+=(gcc)
pkg-config --exists starpu-1.3 2>/dev/null || missing+=(libstarpu-dev)
[ -f /usr/include/oneapi/dnnl/dnnl.h ] || missing+=(libdnnl-dev)   # the bf16 GEMM
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ "${1:-}" = "test" ]; then
    # the browser test drives Debian's chromium (Playwright's own browser download is never used)
    [ -x /usr/bin/chromium ] || missing+=(chromium)
fi
if [ "${1:-}" = "test" ] || [ "${1:-}" = "lab" ]; then
    # multi-process runs: Open MPI and its headers (mpi4py builds against them)
    command -v mpirun >/dev/null || missing+=(openmpi-bin)
    command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
    # the cluster of network-namespace hosts (scripts/cluster.sh): ip and tc
    { command -v ip && command -v tc; } >/dev/null || missing+=(iproute2)
fi
# the OpenCL worker (an accelerator with its own memory node): PoCL's OpenCL device on the
# CPU, the ICD loader and headers, CLBlast for GEMM, clinfo to list the devices
dpkg -s pocl-opencl-icd >/dev/null 2>&1 || missing+=(pocl-opencl-icd)
[ -e /usr/include/CL/cl.h ] || missing+=(opencl-headers)
pkg-config --exists OpenCL 2>/dev/null || missing+=(ocl-icd-opencl-dev)
[ -e /usr/include/clblast_c.h ] || missing+=(libclblast-dev)
command -v clinfo >/dev/null || missing+=(clinfo)
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" "setuptools>=77" wheel "cffi>=1.17" "scipy-openblas32>=0.3.27"
# JupyterLab, ipywidgets and a kernel always: the notebooks are the way in
case "${1:-}" in
    test) extras="[test]" ;;
    lab) extras="[jupyter,bench,mpi]" ;;
    "") extras="[jupyter]" ;;
    *) echo "setup: unknown mode '$1' (give nothing, lab or test)" >&2; exit 2 ;;
esac
# no build isolation: the build deps above are already in the venv, and a rebuild
# after editing kernels/ takes seconds instead of a fresh build environment
"${pip[@]}" --no-build-isolation -e ".${extras}"
if [ "${1:-}" = "test" ]; then
    # the CUDA kernels' compile and link check (tests/kernels/test_cuda_build.py): nvcc from
    # the machine's CUDA toolkit, else PyPI's; cuBLAS's headers and library from PyPI when the
    # toolkit lacks them (Debian 12's main archive has no CUDA toolkit)
    cuda_home=""
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        if [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then cuda_home=$d; break; fi
    done
    cuda=()
    # all one release: unpinned, nvvm and crt resolve newer than nvcc and ptxas refuses the
    # PTX they write ("Unsupported .version"); cccl has the headers cuda_fp16.h needs
    [ -n "$cuda_home" ] || cuda+=("nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-crt==13.0.*"
                                  "nvidia-nvvm==13.0.*" "nvidia-cuda-runtime==13.0.*"
                                  "nvidia-cuda-cccl==13.0.*")
    if [ -z "$cuda_home" ] || [ ! -e "$cuda_home/include/cublas_v2.h" ]; then
        cuda+=("nvidia-cublas==13.0.*")
    fi
    if ((${#cuda[@]})); then "${pip[@]}" "${cuda[@]}"; fi
fi
.venv/bin/python -c "import nntile_lab" && echo "setup: nntile_lab ready in .venv"
.venv/bin/jupyter lab --version >/dev/null && echo "setup: JupyterLab ready: .venv/bin/jupyter lab notebooks/"
