"""One build for every x86-64 CPU: which variant of the kernels loads, and the refusals."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nntile_lab import cpu_variant as cv

V3 = set(cv.X86_64["v3"][1])
V4 = V3 | set(cv.X86_64["v4"][1])


def test_build_variants():
    assert cv.build_variants({}, "x86_64") == {"v4": "-march=x86-64-v4",
                                               "v3": "-march=x86-64-v3"}
    assert cv.build_variants({"NNTILE_LAB_CFLAGS": "-march=native"}, "x86_64") == {
        "custom": "-march=native"}
    assert cv.build_variants({}, "aarch64") == {"generic": ""}


@pytest.mark.parametrize("flags, best", [(V4, "v4"), (V3, "v3"), (V3 | {"avx512f"}, "v3")])
def test_choose_the_best_variant_the_cpu_runs(flags, best):
    assert cv.choose(["v3", "v4"], flags) == best


def test_a_cpu_below_v3_gets_the_fix_not_an_illegal_instruction():
    with pytest.raises(ImportError, match="NNTILE_LAB_CFLAGS=-march=native"):
        cv.choose(["v3", "v4"], {"sse2", "avx"})
    with pytest.raises(ImportError, match="AVX2"):
        cv.choose(["v3", "v4"], None)          # flags unreadable: no x86 variant is safe


def test_override():
    assert cv.choose(["v3", "v4"], V4, "v3") == "v3"
    with pytest.raises(ImportError, match=r"NNTILE_LAB_CPU_VARIANT='v4'.*lacks avx512"):
        cv.choose(["v3", "v4"], V3, "v4")
    with pytest.raises(ImportError, match=r"no such build.*built: v3, v4"):
        cv.choose(["v3", "v4"], V4, "v9")
    assert cv.choose(["custom"], None) == "custom"


def test_cpu_flags_reads_proc_cpuinfo(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\n")
    assert cv.cpu_flags(str(f)) == {"fpu", "avx2", "fma"}
    assert cv.cpu_flags(str(tmp_path / "none")) is None


def _loaded(env):
    code = ("from nntile_lab import _lib; print(_lib.VARIANT, "
            "_lib.ffi.string(_lib.lib.nl_build_isa()).decode())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    return proc


def test_this_machine_loads_its_best_build_and_the_override_switches_it():
    from nntile_lab import _lib
    flags = cv.cpu_flags()
    built = _lib.built_variants()
    expected = cv.choose(built, flags)
    env = {k: v for k, v in os.environ.items() if k != cv.ENV}
    proc = subprocess.run([sys.executable, "-c", "from nntile_lab import _lib; "
                           "print(_lib.VARIANT)"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.stdout.split() == [expected], proc.stderr
    if "v3" in built and cv.runs_on("v3", flags):
        proc = _loaded({cv.ENV: "v3"})
        assert proc.stdout.split() == ["v3", "avx2+fma"], proc.stderr
    if "v4" in built and cv.runs_on("v4", flags):
        proc = _loaded({cv.ENV: "v4"})
        assert proc.stdout.split() == ["v4", "avx512f"], proc.stderr
    proc = _loaded({cv.ENV: "v9"})
    assert proc.returncode == 1 and "NNTILE_LAB_CPU_VARIANT='v9'" in proc.stderr


def _instructions(variant: str) -> str:
    from nntile_lab import _lib
    path = Path(_lib.EXT_FILE).with_name(f"{variant}.abi3.so")
    assert path.exists(), f"no {variant} build in {path.parent}"
    return subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], check=True,
                          capture_output=True, text=True).stdout


# AVX-512's registers: zmm, the mask registers k0-k7, and xmm/ymm 16-31 (EVEX only)
AVX512 = re.compile(r"%zmm\d|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b")


def test_the_avx2_build_has_no_avx512_instruction():
    """What makes the wheel safe on an AVX2-only CPU: its v3 module uses AVX2 (ymm) and no
    AVX-512 register anywhere; the v4 module does use them (so the check can see them)."""
    from nntile_lab import _lib
    if set(_lib.built_variants()) != {"v3", "v4"}:
        pytest.fail(f"this install has builds {_lib.built_variants()}, not v3 and v4 "
                    "(NNTILE_LAB_CFLAGS set at build time?)")
    v3, v4 = _instructions("v3"), _instructions("v4")
    assert "%ymm" in v3 and not AVX512.search(v3)
    assert AVX512.search(v4)
