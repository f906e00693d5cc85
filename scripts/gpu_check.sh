#!/usr/bin/env bash
# nntile_lab on an NVIDIA GPU in one command (issue 32; docs/accelerators.md, "CUDA"): a
# StarPU with CUDA and nntile_lab built against it (here, or carried as a bundle), then the
# parts of scripts/gpu_check.py in order, each in its own process within its time budget (a
# part that fails or runs out of time never stops the next), and a summary table.
#
#   scripts/gpu_check.sh [options]
#     --build PREFIX     build StarPU with CUDA into PREFIX (scripts/build_starpu_cuda.sh:
#                        Debian's source through apt-get source; needs network) and
#                        nntile_lab against it in .venv, then check
#     --prebuilt DIR     take StarPU, the libraries and the Python packages from a bundle
#                        (DIR, or DIR.tar.xz) made by --make-bundle; this checkout's
#                        nntile_lab/_ext must be built against that StarPU (the bundle's
#                        manifest.json says with what)
#     --make-bundle DIR  on the build machine: make that bundle (DIR and DIR.tar.xz) from
#                        --starpu PREFIX, for --bundle-python X.Y, and stop
#     --starpu PREFIX    the StarPU with CUDA --make-bundle takes (default build-gpu/starpu)
#     --bundle-python V  the Python version of the machine that will run it (default: this
#                        one's); its cffi wheel is fetched with pip
#     --emulate          no GPU here: the accelerator is the OpenCL worker (PoCL's device on
#                        the CPU), toy sizes, part (a) the kernels' host emulation
#     --out DIR          records and log (default $OUT when set, else runs/gpu_check-DATE)
#     --parts LETTERS    the parts to run, in order (default abcdef)
#     --budget P=S,...   seconds per part (default a=120,b=60,c=30,d=90,e=600,f=120; on the
#                        H200 parts a-d and f took 3-18 s each, part e about 9 minutes)
#     --e-plan G,...     part (e)'s groups: fits, overflow, trace, compile (default all)
#     --deadline S       all of it within S seconds: a part gets at most what is left (less
#                        20 s for the summary); one with under 10 s left is not started
#     --pack             at the end, the records in OUT/gpu_check.tar.gz (few files)
#     --python PY        the Python (default: .venv/bin/python, else python3)
# Without --build or --prebuilt the checkout is used as it is installed (e.g. after
# scripts/build_starpu_cuda.sh). Exit status: 0 when every part passed (or was skipped in
# emulation), 1 when one failed, 2 for bad options.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() { sed -n '6,33p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu_check: $*" >&2; exit 2; }

build="" prebuilt="" make_bundle="" starpu=$repo/build-gpu/starpu bundle_python="" emulate=0
out=${OUT:-} parts=abcdef budgets="" pack=0 py="" deadline=0
while (($#)); do
    case "$1" in
        --build|--prebuilt|--make-bundle|--starpu|--bundle-python|--out|--parts|--budget|--python|\
        --deadline|--e-plan)
            [ $# -ge 2 ] || die "$1 needs a value"
            case "$1" in
                --build) build=$2 ;; --prebuilt) prebuilt=$2 ;; --make-bundle) make_bundle=$2 ;;
                --starpu) starpu=$2 ;; --bundle-python) bundle_python=$2 ;; --out) out=$2 ;;
                --parts) parts=$2 ;; --budget) budgets=$2 ;; --python) py=$2 ;;
                --deadline) deadline=$2 ;; --e-plan) export NL_GPU_CHECK_E_PLAN=$2 ;;
            esac
            shift 2 ;;
        --emulate) emulate=1; shift ;;
        --pack) pack=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[[ $deadline =~ ^[0-9]+$ ]] || die "--deadline '$deadline': give whole seconds, e.g. 480"
if [ -n "${NL_GPU_CHECK_E_PLAN:-}" ]; then
    [[ ,$NL_GPU_CHECK_E_PLAN, =~ ^(,(fits|overflow|trace|compile))+,$ ]] \
        || die "--e-plan '$NL_GPU_CHECK_E_PLAN': give groups from fits,overflow,trace,compile"
fi
[[ $parts =~ ^[a-f]+$ ]] || die "--parts '$parts': give letters from abcdef, e.g. --parts abd"
n=0
for x in "$build" "$prebuilt" "$make_bundle"; do [ -n "$x" ] && n=$((n + 1)); done
((n <= 1)) || die "give one of --build, --prebuilt and --make-bundle"
((emulate == 0 || n == 0)) || die "--emulate runs on this checkout as installed: no --build, --prebuilt or --make-bundle with it"
declare -A budget=([a]=120 [b]=60 [c]=30 [d]=90 [e]=600 [f]=120)
if [ -n "$budgets" ]; then
    IFS=, read -ra pairs <<<"$budgets"
    for kv in "${pairs[@]}"; do
        [[ $kv =~ ^([a-f])=([1-9][0-9]*)$ ]] || die "--budget '$kv': give PART=SECONDS, e.g. e=300"
        budget[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
    done
fi
if [ -z "$py" ]; then
    if [ -x .venv/bin/python ] && [ -z "$prebuilt" ]; then py=.venv/bin/python; else py=python3; fi
fi
command -v "$py" >/dev/null || die "no Python '$py': give --python PY"

# libraries found on this machine (the CUDA runtime and cuBLAS come from the GPU machine's
# own toolkit or PyPI wheels, never from the bundle: they must match its driver)
lib_dir() {   # lib_dir SONAME: the first directory holding it, else nothing
    local d
    for d in $("$py" - <<'EOF'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib")), reverse=True):
        print(d)
EOF
) /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        [ -e "$d/$1" ] && { echo "$d"; return; }
    done
}

# ---- a bundle for a machine that cannot build (no network, no apt) ---------------------
if [ -n "$make_bundle" ]; then
    [ -e "$starpu/lib/pkgconfig/starpu-1.3.pc" ] || die "--starpu '$starpu' holds no StarPU 1.3 (lib/pkgconfig/starpu-1.3.pc): build one with scripts/build_starpu_cuda.sh --portable PREFIX"
    grep -q '^#define STARPU_USE_CUDA 1' "$starpu"/include/starpu/1.3/starpu_config.h 2>/dev/null \
        || die "the StarPU in '$starpu' has no CUDA: build it with scripts/build_starpu_cuda.sh --portable"
    ext=$(ls nntile_lab/_ext/*.so 2>/dev/null | head -1)
    [ -n "$ext" ] || die "this checkout has no built extension: STARPU_PREFIX=$starpu ... pip install -e . first"
    ldd "$ext" | grep -q "$starpu/lib/libstarpu" || die "nntile_lab/_ext is not built against '$starpu' (ldd $ext): rebuild with STARPU_PREFIX=$starpu"
    pyver=${bundle_python:-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
    [[ $pyver =~ ^3\.[0-9]+$ ]] || die "--bundle-python '$pyver': give a version like 3.12"
    dest=$(realpath -m "$make_bundle")
    rm -rf "$dest" "$dest.tar.xz"
    mkdir -p "$dest/starpu/lib" "$dest/lib" "$dest/fallback" "$dest/site" "$dest/wheels"
    cp -a "$starpu"/lib/libstarpu-1.3.so* "$dest/starpu/lib/"
    strip --strip-unneeded "$dest"/starpu/lib/libstarpu-1.3.so.*.*.* 2>/dev/null
    # every library the extension and StarPU load, but glibc's, the compiler runtime, CUDA's
    # and StarPU itself; those a newer system surely has (libgomp, libudev) only as a
    # fallback, used where that machine lacks them
    ldd "$ext" "$starpu"/lib/libstarpu-1.3.so | awk '/=> \// {print $1, $3}' | sort -u |
    while read -r name path; do
        case $name in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|\
            libstdc++.so*|libcuda*|libcublas*|libcudart*|libstarpu*) ;;
            libgomp.so*|libudev.so*) cp -L "$path" "$dest/fallback/$name" ;;
            *) cp -L "$path" "$dest/lib/$name" ;;
        esac
    done
    cffi=$("$py" -c 'import cffi; print(cffi.__version__)')
    blas=$("$py" -c 'import importlib.metadata as m; print(m.version("scipy-openblas32"))')
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest/wheels" \
        "cffi==$cffi" pycparser "scipy-openblas32==$blas" 2>&1 | grep -v '^WARNING: Location' \
        || true
    ls "$dest"/wheels/cffi-*.whl >/dev/null 2>&1 || die "pip found no cffi $cffi wheel for Python $pyver"
    "$py" -m pip install -q --no-deps --only-binary=:all: --python-version "$pyver" \
        --implementation cp --target "$dest/site" "$dest"/wheels/*.whl 2>&1 \
        | grep -v '^WARNING: Location' || true
    rm -rf "$dest/wheels"
    "$py" - "$dest" "$pyver" "$starpu" "$ext" <<'EOF'
import json, os, subprocess, sys, time
dest, pyver, starpu, ext = sys.argv[1:]
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.split("\n")
json.dump({"python": pyver, "starpu_prefix": starpu, "extension": os.path.basename(ext),
           "commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain")),
           "made_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
           "nvcc": [l for l in nvcc if "release" in l],
           "files": sorted(os.path.relpath(os.path.join(d, f), dest)
                           for d, _, fs in os.walk(dest) for f in fs
                           if "/site/" not in os.path.join(d, f) + "/")},
          open(os.path.join(dest, "manifest.json"), "w"), indent=1)
EOF
    tar -cJf "$dest.tar.xz" -C "$(dirname "$dest")" "$(basename "$dest")"
    echo "gpu_check: bundle in $dest ($(du -sh "$dest" | cut -f1)) and $dest.tar.xz ($(du -sh "$dest.tar.xz" | cut -f1)), for Python $pyver"
    exit 0
fi

out=${out:-runs/gpu_check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/records" || die "--out '$out' cannot be created"
out=$(realpath "$out")
rec=$out/records
log=$out/gpu_check.log
exec > >(tee -a "$log") 2> >(tee -a "$log" >&2)
t_start=$SECONDS
export PYTHONUNBUFFERED=1
# one StarPU home for every part: the bus calibration of the first start and the
# performance models of part (f)'s calibration are kept for the later ones
export STARPU_HOME=${STARPU_HOME:-$(mktemp -d "${TMPDIR:-/tmp}/nl_gpu_check_starpu.XXXXXX")}
((emulate)) && export NL_GPU_CHECK_EMULATE=1

echo "== gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), records in $out"
echo "== the machine"
nvidia-smi 2>&1 | head -20 || echo "(no nvidia-smi)"
echo "   glibc: $(ldd --version 2>&1 | head -1)"
echo "   gcc:   $(gcc --version 2>&1 | head -1)"
echo "   nvcc:  $(nvcc --version 2>&1 | tail -2 | head -1)"

if [ -n "$prebuilt" ]; then
    if [ -f "$prebuilt" ]; then   # DIR.tar.xz: unpacked beside the records
        mkdir -p "${TMPDIR:-/tmp}/nl_gpu_bundle"
        tar -xJf "$prebuilt" -C "${TMPDIR:-/tmp}/nl_gpu_bundle" 2>/dev/null \
            || "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
                "$prebuilt" "${TMPDIR:-/tmp}/nl_gpu_bundle" || die "cannot unpack '$prebuilt'"
        prebuilt=$(ls -d "${TMPDIR:-/tmp}"/nl_gpu_bundle/*/ | head -1)
    fi
    b=$(realpath "$prebuilt")
    [ -e "$b/manifest.json" ] || die "--prebuilt '$prebuilt' has no manifest.json: make it with --make-bundle"
    want=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["python"])' "$b/manifest.json")
    have=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$want" = "$have" ] || die "the bundle is for Python $want but '$py' is $have: make one with --bundle-python $have"
    # the fallback libraries only where this machine lacks them
    mkdir -p "$b/fallback-used"
    for f in "$b"/fallback/*; do
        [ -e "$f" ] || continue
        ldconfig -p 2>/dev/null | grep -q "${f##*/} " || ln -sf "$f" "$b/fallback-used/"
    done
    cudalibs=""
    for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
        d=$(lib_dir $so)
        if [ -n "$d" ]; then cudalibs=$cudalibs:$d; else echo "gpu_check: $so not found on this machine (the parts will fail)"; fi
    done
    export LD_LIBRARY_PATH="$b/starpu/lib:$b/lib:$b/fallback-used${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$b/site:$repo${PYTHONPATH:+:$PYTHONPATH}"
    echo "== bundle $b: $(tr -d '\n ' <"$b/manifest.json" | cut -c1-300)"
elif [ -n "$build" ]; then
    echo "== building StarPU with CUDA into $build and nntile_lab against it"
    [ -x .venv/bin/python ] || scripts/setup.sh || die "scripts/setup.sh failed"
    scripts/build_starpu_cuda.sh "$build" || die "scripts/build_starpu_cuda.sh failed (above)"
    py=.venv/bin/python
fi

echo "== environment"
"$py" scripts/gpu_check.py env --out "$rec"
echo "== ready: the build loads and an accelerator worker starts"
"$py" scripts/gpu_check.py ready --out "$rec" || echo "gpu_check: not ready (above); running the parts anyway, each says why it fails"

for ((i = 0; i < ${#parts}; i++)); do
    p=${parts:i:1}
    t0=$SECONDS
    b=${budget[$p]}
    if ((deadline)); then
        left=$((deadline - (SECONDS - t_start) - 20))
        ((left < b)) && b=$left
        if ((b < 10)); then
            echo "== part ($p): not started, ${left} s left of --deadline $deadline"
            "$py" scripts/gpu_check.py stopped "$p" 125 0 --out "$rec"
            continue
        fi
    fi
    echo "== part ($p), budget $b s"
    # the part's end, for the parts that pace their own steps (e: one process per
    # measurement, each given what is left)
    export NL_GPU_CHECK_PART_END=$(($(date +%s) + b))
    timeout -k 10 "$b" "$py" scripts/gpu_check.py part "$p" --out "$rec"
    rc=$?
    ((rc == 0)) || "$py" scripts/gpu_check.py stopped "$p" "$rc" "$((SECONDS - t0))" --out "$rec"
done

echo "== summary ($((SECONDS - t_start)) s in all)"
"$py" scripts/gpu_check.py summary --parts "$parts" --out "$rec"
status=$?
cp "$rec/summary.json" "$out/summary.json" 2>/dev/null
if ((pack)); then
    tar -czf "$out/gpu_check.tar.gz" -C "$out" records && rm -rf "$rec"
    echo "== records packed in $out/gpu_check.tar.gz"
fi
exit $status
