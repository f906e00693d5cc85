#!/usr/bin/env bash
# Build scripts/bf16_gemm_bench.c and run it with each library's AVX-512 and AVX2 code
# paths, one thread per call. Needs: libdnnl-dev, libxsmm-dev (Debian), the `mkl` and
# `mkl-include` wheels unpacked or installed (MKL_ROOT: the folder with lib/libmkl_rt.so.3;
# without it MKL is skipped), scipy-openblas32 in .venv.
#   scripts/bf16_gemm_bench.sh [avx512|avx2|both]
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
inc=$($py -c "import scipy_openblas32 as s; print(s.get_include_dir())")
lib=$($py -c "import scipy_openblas32 as s; print(s.get_lib_dir())")
out=${TMPDIR:-/tmp}/nl_bf16_gemm_bench
gcc -O2 -std=gnu11 -o "$out" scripts/bf16_gemm_bench.c -I"$inc" -L"$lib" \
    -Wl,-rpath,"$lib" -lscipy_openblas -ldnnl -lxsmm -lxsmmnoblas -lpthread -lrt -ldl -lm
export OMP_NUM_THREADS=1 MKL_THREADING_LAYER=SEQUENTIAL MKL_NUM_THREADS=1
[ -n "${MKL_ROOT:-}" ] && export LD_LIBRARY_PATH="$MKL_ROOT/lib:${LD_LIBRARY_PATH:-}"
grep -m1 "model name" /proc/cpuinfo
# OpenBLAS picks its kernels by OPENBLAS_CORETYPE when set (some machines set Haswell
# globally): name the code path explicitly on each side
case "${1:-both}" in avx512|both)
    echo "== AVX-512 code paths (libraries' defaults, OPENBLAS_CORETYPE=SkylakeX)"
    OPENBLAS_CORETYPE=SkylakeX "$out";;
esac
case "${1:-both}" in avx2|both)
    echo "== AVX2 code paths (ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2" \
         "LIBXSMM_TARGET=hsw OPENBLAS_CORETYPE=Haswell)"
    ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 LIBXSMM_TARGET=hsw \
        OPENBLAS_CORETYPE=Haswell "$out";;
esac
