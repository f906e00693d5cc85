#!/usr/bin/env bash
# Build the sdist and, from it, the wheel (python -m build), install the wheel into a fresh
# virtual environment outside the checkout and run the smoke test there, once with the
# variant this CPU picks and once with the AVX2 build (NNTILE_LAB_CPU_VARIANT=v3), the one an
# AVX2-only machine loads. Usage: scripts/wheel_smoke.sh [PYTHON]   (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${1:-.venv/bin/python}
tmp=$(mktemp -d /tmp/nntile_lab_wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$py" -m build --outdir "$tmp/dist" . >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; exit 1; }
ls "$tmp/dist"
wheel=$(ls "$tmp"/dist/*.whl)
# the wheel carries every CPU variant and the license
"$py" - "$wheel" <<'PY'
import platform, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
so = sorted(n.split("/")[-1].split(".")[0] for n in names
            if n.startswith("nntile_lab/_ext/") and n.endswith(".so"))
lic = [n for n in names if n.endswith("/LICENSE")]
print("wheel: extension variants", so, "license", lic)
if platform.machine() == "x86_64":
    assert {"v3", "v4"} <= set(so), f"the wheel lacks a CPU variant: {so}"
assert lic, "no LICENSE in the wheel"
PY
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
cd "$tmp"   # outside the checkout: nothing of it on sys.path
NNTILE_LAB_CHECKOUT=$repo "$tmp/venv/bin/python" "$repo/scripts/smoke_wheel.py"
NNTILE_LAB_CHECKOUT=$repo NNTILE_LAB_CPU_VARIANT=v3 "$tmp/venv/bin/python" "$repo/scripts/smoke_wheel.py"
"$tmp/venv/bin/nntile-lab" --help >/dev/null
echo "wheel smoke: ok"
