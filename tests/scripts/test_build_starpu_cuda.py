"""scripts/build_starpu_cuda.sh (issue 18 §5): its arguments, the toolkit checks, and the
configure line it would run; kernels/build.py's STARPU_PREFIX. The build itself (Debian's
StarPU source with CUDA, ~10 min) is not run here: docs/accelerators.md says what was."""
import os
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "build_starpu_cuda.sh")
sys.path.insert(0, os.path.join(ROOT, "kernels"))
import cuda_build  # noqa: E402


def run(*args, env=None):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def toolkit(root, cublas=True):
    """A stand-in CUDA toolkit: the files the script checks for."""
    files = ["bin/nvcc", "include/cuda_runtime.h", "lib64/libcudart.so"]
    files += ["include/cublas_v2.h", "lib64/libcublas.so", "include/cusparse.h"] if cublas else []
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (root / "bin/nvcc").chmod(0o755)
    return root


def test_help_and_bad_arguments(tmp_path):
    done = run("--help")
    assert done.returncode == 0 and "--print-configure" in done.stdout
    for args, needle in [((), "give the install PREFIX"),
                         (("--jobs", "0", "p"), "--jobs '0' must be a whole number"),
                         (("--maxcpus", "1000", "p"), "more than StarPU 1.3 can take"),
                         (("--frobnicate", "p"), "unknown option '--frobnicate'"),
                         (("a", "b"), "one PREFIX only"),
                         (("--cuda",), "--cuda needs a directory"),
                         (("--cuda", str(tmp_path / "none"), "p"), "no nvcc in")]:
        done = run(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert needle in done.stderr, (args, done.stderr)


def test_a_toolkit_without_cublas_is_refused_before_anything_is_built(tmp_path):
    cuda = toolkit(tmp_path / "cuda", cublas=False)
    done = run("--cuda", str(cuda), str(tmp_path / "prefix"))
    assert done.returncode == 2 and "cuBLAS is missing" in done.stderr
    assert not (tmp_path / "prefix").exists()   # nothing made


def test_the_configure_line_enables_cuda_and_opencl_into_the_prefix(tmp_path):
    cuda = toolkit(tmp_path / "cuda")
    done = run("--cuda", str(cuda), "--maxcpus", "96", "--print-configure",
               str(tmp_path / "prefix"))
    assert done.returncode == 0, done.stderr
    line = shlex.split(done.stdout)
    assert line[0] == "./configure"
    for flag in (f"--prefix={tmp_path / 'prefix'}", "--enable-cuda", f"--with-cuda-dir={cuda}",
                 f"--with-cuda-lib-dir={cuda / 'lib64'}", "--enable-opencl",
                 "--enable-maxcpus=96", "--disable-build-doc",
                 "NVCCFLAGS=-Xcompiler -fPIC", f"LDFLAGS=-Wl,-rpath,{cuda / 'lib64'}"):
        assert flag in line, (flag, line)


def test_starpu_prefix_points_the_build_at_that_starpu(tmp_path, monkeypatch):
    pc = tmp_path / "lib" / "pkgconfig"
    pc.mkdir(parents=True)
    (pc / "starpu-1.3.pc").write_text("")
    monkeypatch.setenv("STARPU_PREFIX", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_PATH", "/elsewhere")
    assert cuda_build.use_starpu_prefix() == [f"-Wl,-rpath,{tmp_path / 'lib'}"]
    assert os.environ["PKG_CONFIG_PATH"] == f"{pc}{os.pathsep}/elsewhere"
    monkeypatch.setenv("STARPU_PREFIX", str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match=r"no lib/pkgconfig/starpu-1\.3\.pc there"):
        cuda_build.use_starpu_prefix()
    monkeypatch.delenv("STARPU_PREFIX")
    assert cuda_build.use_starpu_prefix() == []


def test_debians_starpu_has_no_cuda_and_one_configured_with_it_does(tmp_path):
    flags = subprocess.run(["pkg-config", "--cflags", "starpu-1.3"], check=True,
                           capture_output=True, text=True).stdout.split()
    assert not cuda_build.starpu_has_cuda(flags)   # Debian's: what Runtime(ncuda) says
    (tmp_path / "starpu_config.h").write_text("#define STARPU_USE_CUDA 1\n")
    assert cuda_build.starpu_has_cuda([f"-I{tmp_path}"])


def test_a_portable_build_leaves_out_what_another_machine_may_lack(tmp_path):
    """--portable: the StarPU scripts/gpu_check.sh --make-bundle carries to a GPU machine
    (no OpenCL ICD loader, Open MPI or GLPK there): CUDA and cuBLAS only."""
    cuda = toolkit(tmp_path / "cuda")
    done = run("--cuda", str(cuda), "--portable", "--maxcpus", "32", "--print-configure",
               str(tmp_path / "prefix"))
    assert done.returncode == 0, done.stderr
    line = shlex.split(done.stdout)
    for flag in ("--enable-cuda", "--disable-opencl", "--disable-mpi", "--disable-glpk",
                 "--enable-maxcpus=32"):
        assert flag in line, (flag, line)
    assert "--enable-opencl" not in line
    assert "--disable-opencl" not in shlex.split(run("--cuda", str(cuda), "--print-configure",
                                                     str(tmp_path / "p")).stdout)
