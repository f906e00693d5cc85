"""The CUDA kernels (kernels/cuda/, issue 18 §5) compile with the machine's nvcc and link
with cuBLAS, every symbol resolved, so they cannot rot where no GPU runs them; the codelet
glue that calls them compiles as a StarPU with CUDA sees it.

No nvcc or no cuBLAS headers fail these tests loudly (scripts/setup.sh test installs
cuBLAS from PyPI when the toolkit lacks it): they never skip."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "kernels")
sys.path.insert(0, KERNELS)
import codegen  # noqa: E402
import cuda_build  # noqa: E402
from codelets import CODELETS, Codelet  # noqa: E402


def _exported(so):
    out = subprocess.run(["nm", "-D", "--defined-only", so], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if " T nl_cu_" in line}


@pytest.mark.slow
def test_every_cuda_source_compiles_and_links_with_cublas(tmp_path):
    # one architecture here (the build's default has two): the same source, half the time
    done = subprocess.run([sys.executable, os.path.join(KERNELS, "cuda_build.py"),
                           "--out", str(tmp_path), "--arch", "sm_80"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "linked with cuBLAS" in done.stdout
    so = tmp_path / "libnl_cuda.so"
    # every row with a CUDA implementation has its host function, and nothing else is there
    want = {f"nl_cu_{r.name}" for r in CODELETS if r.cuda}
    assert _exported(str(so)) == want


def test_the_link_check_refuses_a_kernel_calling_what_does_not_exist(tmp_path):
    src = tmp_path / "broken.cu"
    src.write_text('extern "C" void nl_nowhere(float *);\n'
                   'extern "C" void nl_cu_broken(float *x) { nl_nowhere(x); }\n')
    nvcc, incs, _ = cuda_build.cuda_paths()
    obj = str(tmp_path / "broken.o")
    subprocess.run([nvcc, "-Xcompiler", "-fPIC", "-c", str(src), "-o", obj], check=True)
    with pytest.raises(RuntimeError, match="nl_nowhere"):
        cuda_build.link_shared([obj], str(tmp_path / "broken.so"))


def test_the_glue_and_runtime_compile_as_a_starpu_with_cuda_sees_them():
    cuda_build.check_glue()   # raises with the compiler's output on any error or warning


def test_the_table_gives_cuda_to_every_op_the_gpt2_step_uses():
    kinds = {r.name: r.cuda for r in CODELETS}
    # (tests/runtime/test_cuda.py traces a whole step, fp32 and bf16, for the full list)
    assert kinds["gemm"] == kinds["gemm_bf16"] == kinds["gemm_bf16_c16"] == "cublas"
    for row in ("gelu", "gelu_backward", "axpby", "sum_slice", "max_slice", "softmax_tile",
                "softmax_backward", "layer_norm_tile", "layer_norm_backward_fiber",
                "embedding", "embedding_backward", "cross_entropy_stats",
                "cross_entropy_backward", "adamw", "sgd_momentum", "mask_causal", "permute",
                "f32_to_bf16", "bf16_to_f32", "gelu_bf16", "gelu_backward_bf16",
                "cross_entropy_stats_bf16", "cross_entropy_backward_bf16"):
        assert kinds[row] == "kernel", row
    c = codegen.generate_c()
    for r in CODELETS:   # its codelets (and their W/RW twins) carry the CUDA function
        assert (f".cuda_funcs = {{nl_cuda_{r.name}}}" in c) == bool(r.cuda), r.name
    # and only in a StarPU with CUDA
    assert c.count(".cuda_funcs") == c.count("#ifdef STARPU_USE_CUDA\n    .cuda_funcs")


def test_a_row_with_an_unknown_cuda_kind_is_a_table_error(monkeypatch):
    bad = Codelet("scale", "R x, W out", "i64 n, f32 alpha", "n", cuda="cudnn")
    monkeypatch.setattr(codegen, "CODELETS", [bad])
    with pytest.raises(codegen.TableError, match=r"scale: cuda='cudnn' is not one of"):
        codegen.generate_c()
