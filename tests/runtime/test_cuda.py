"""CUDA workers (issue 18 §5): ``Runtime(ncuda=N)`` and ``on("cuda")`` on this build.

Debian's StarPU has no CUDA: asking for CUDA workers is one clear error, naming the script
that builds a StarPU with CUDA, before StarPU starts. Against a StarPU with CUDA
(scripts/build_starpu_cuda.sh) the same tests check the other branch: more workers than GPUs
is the error. The GPU runs themselves are tests/ops/test_cuda.py (marker ``cuda``)."""
import subprocess
import sys

import pytest

import nntile_lab as nl
from nntile_lab._lib import lib
from nntile_lab.runtime import CudaUnavailable, cuda_devices
from nntile_lab.spec import ExperimentSpec


def _stop_active():
    if nl.Runtime.active is not None:
        nl.Runtime.active.stop()


def test_asking_for_cuda_workers_beyond_what_exists_fails_before_starpu_starts():
    _stop_active()
    if lib.nl_cuda_built():
        ask = cuda_devices() + 1
        with pytest.raises(CudaUnavailable, match=rf"ncuda={ask} but this machine shows "
                                                  r"\d+ CUDA device.*nvidia-smi -L"):
            nl.Runtime(ncpu=1, ncuda=ask)
    else:
        assert cuda_devices() == 0
        with pytest.raises(CudaUnavailable, match=r"ncuda=1: this StarPU has no CUDA .*"
                                                  r"scripts/build_starpu_cuda\.sh"):
            nl.Runtime(ncpu=1, ncuda=1)
    assert nl.Runtime.active is None   # nothing started, nothing left to stop
    assert issubclass(CudaUnavailable, ValueError)   # callers catching ValueError still do


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_ncuda_must_be_a_count(bad):
    with pytest.raises(ValueError, match=r"ncuda=.* must be an integer ≥ 0"):
        nl.Runtime(ncpu=1, ncuda=bad)


def test_cuda_confinement_needs_cuda_workers():
    _stop_active()
    with nl.Runtime(ncpu=1) as rt:
        assert "ncuda" not in repr(rt)
        with pytest.raises(ValueError, match=r"on\('cuda'\) needs CUDA workers: .*"
                                             r"Runtime\(ncuda=1\)"), rt.on("cuda"):
            pass
        assert rt.where == "any"
        with pytest.raises(CudaUnavailable, match=r"has no CUDA worker: start it with ncuda=1"):
            rt.cuda_memory_node()


def test_the_spec_and_cli_carry_ncuda():
    assert ExperimentSpec(ncuda=2).runtime_kwargs()["ncuda"] == 2
    assert "ncuda" not in ExperimentSpec().runtime_kwargs()
    with pytest.raises(ValueError, match=r"ncuda=-1 \(--ncuda\) must be ≥ 0"):
        ExperimentSpec(ncuda=-1)


def test_train_with_ncuda_on_a_starpu_without_cuda_stops_before_any_work(tmp_path):
    if lib.nl_cuda_built():   # the other branch: a StarPU with CUDA takes --ncuda
        assert ExperimentSpec(ncuda=1).runtime_kwargs()["ncuda"] == 1
        return
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train", "--ncuda", "1",
                           "--steps", "1", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "ncuda=1: this StarPU has no CUDA" in done.stderr
    assert "scripts/build_starpu_cuda.sh" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.parametrize("bad", [15, 0, -64, True, 64.0, "64", 2**32 + 16])
def test_the_cuda_memory_cap_is_checked_before_starpu_starts(bad):
    _stop_active()
    with pytest.raises(ValueError, match=r"cuda_memory_limit_mb=.* must be an integer from 16 "
                                         r"to 2,147,483,647 \(MiB\) with ncuda ≥ 1, or None"):
        nl.Runtime(ncpu=1, ncuda=1, cuda_memory_limit_mb=bad)
    with pytest.raises(ValueError, match=r"cuda_memory_limit_mb=64 .*with ncuda ≥ 1"):
        nl.Runtime(ncpu=1, cuda_memory_limit_mb=64)   # a cap without a GPU worker
    assert nl.Runtime.active is None


def test_the_spec_and_cli_carry_the_cuda_memory_cap(tmp_path):
    spec = ExperimentSpec(ncuda=1, cuda_memory_limit_mb=256)
    assert spec.runtime_kwargs()["cuda_memory_limit_mb"] == 256
    assert ExperimentSpec(ncuda=1).runtime_kwargs()["cuda_memory_limit_mb"] is None
    with pytest.raises(ValueError, match=r"cuda_memory_limit_mb=64 \(--cuda-memory-limit-mb\) "
                                         r"needs CUDA workers: --ncuda N"):
        ExperimentSpec(cuda_memory_limit_mb=64)
    with pytest.raises(ValueError, match=r"cuda_memory_limit_mb=8 \(--cuda-memory-limit-mb\) "
                                         r"must be ≥ 16"):
        ExperimentSpec(ncuda=1, cuda_memory_limit_mb=8)
    done = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train",
                           "--cuda-memory-limit-mb", "64", "--steps", "1", "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "needs CUDA workers: --ncuda N" in done.stderr and "Traceback" not in done.stderr


def test_heteroprio_takes_cuda_workers_but_not_cuda_and_opencl_together():
    _stop_active()
    with pytest.raises(ValueError, match=r"heteroprio' with nopencl=1 and ncuda=1: .*one kind "
                                         r"of accelerator"):
        nl.Runtime(scheduler="heteroprio", ncpu=1, nopencl=1, ncuda=1)
    if not lib.nl_cuda_built():   # no longer refused for CUDA: only this StarPU's lack of it
        with pytest.raises(CudaUnavailable, match=r"ncuda=1: this StarPU has no CUDA"):
            nl.Runtime(scheduler="heteroprio", ncpu=1, ncuda=1)
    # a CUDA task class is the OpenCL one's: shared with the CPU, or the device's own
    cpu, ocl, cu = lib.STARPU_CPU, lib.STARPU_OPENCL, lib.STARPU_CUDA
    for p in (0, 5):
        assert lib.nl_heteroprio_bucket_of(cpu | cu, p) == lib.nl_heteroprio_bucket_of(cpu | ocl, p)
        assert lib.nl_heteroprio_bucket_of(cu, p) == lib.nl_heteroprio_bucket_of(ocl, p)
        assert lib.nl_heteroprio_bucket_of(cu, p) != lib.nl_heteroprio_bucket_of(cpu | cu, p)


def test_a_task_too_big_for_the_capped_gpu_is_named_with_the_cuda_cap(monkeypatch):
    """The message a capped GPU gives (kernels/runtime/submit.c refuses the task: -EFBIG),
    with the runtime's CUDA cap and StarPU's CUDA pipeline in it."""
    from types import SimpleNamespace

    from nntile_lab._lib import ffi
    from nntile_lab.ops import _common
    name = ffi.new("char[]", b"gemm")

    def refused(op, tile):
        op[0], tile[0] = 3, 8 << 20
        return 20 << 20
    monkeypatch.setattr(_common, "lib", SimpleNamespace(nl_device_refused_task=refused,
                                                        nl_op_name=lambda op: name))
    monkeypatch.setattr(nl.Runtime, "active", SimpleNamespace(
        device_kind="cuda", cuda_memory_limit_mb=16, alive=True))
    monkeypatch.setenv("STARPU_CUDA_PIPELINE", "3")
    err = _common._task_too_big_for_device()
    assert str(err) == (
        "a gemm task needs 20.0 MiB of tiles on the GPU at once (its largest tile 8.0 MiB), "
        "more than 1/3 of cuda_memory_limit_mb=16 (the CUDA worker holds the tiles of 3 tasks "
        "at once: STARPU_CUDA_PIPELINE): StarPU would evict and retry forever. Raise "
        "cuda_memory_limit_mb (--cuda-memory-limit-mb) to at least 60, use smaller tiles for "
        "this op, or run it on the CPU workers (with rt.on('cpu'))")


# a GPT-2 with several tiles along every dimension (the split-axis passes), and with every
# dimension one tile (the *_tile kernels; under bf16 the head's bf16 logits, which need
# n_embd in one tile)
STEP_TILINGS = {
    "split": dict(batch_tile=2, seq_tile=8, embd_tile=16, inner_tile=64, head_tile=1,
                  vocab_tile=48),
    "whole": dict(batch_tile=4, seq_tile=16, embd_tile=32, inner_tile=128, head_tile=2,
                  vocab_tile=96)}
STEP_OPS = {   # what a step must have run: the test sees a whole step
    "fp32": {"gemm", "cross_entropy_stats", "cross_entropy_backward", "sumsq_all", "adamw"},
    "bf16": {"gemm_bf16", "f32_to_bf16", "gelu_bf16", "gelu_backward_bf16", "adamw"}}


@pytest.mark.parametrize("tiling", STEP_TILINGS)
@pytest.mark.parametrize("precision", STEP_OPS)
def test_every_op_of_a_training_step_has_a_cuda_kernel(rt1, precision, tiling):
    """A GPT-2 training step (forward, backward, gradient clipping, AdamW: the trainer's
    step, as scripts/gpu_check.py measures it) under ``rt.on("cuda", fallback="cpu")`` stays
    on the GPU: every op it submits has a CUDA implementation (the H200 run found the bf16
    step's head GEMM and cross-entropy on the CPU, 4.6 s of a 40 ms step). Traced on the
    CPU here."""
    from nntile_lab import experiment
    from nntile_lab.bench.kernels import table
    from nntile_lab.trace.recorder import Trace
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=32, vocab_size=96, seq_len=16, batch=4,
                          lr=1e-3, clip=1.0, seed=3, precision=precision,
                          **STEP_TILINGS[tiling])
    model, opt, schedule = experiment.build(spec)
    step = experiment.step_function(spec, rt1, model, opt, schedule,
                                    experiment.RandomTokens(spec.vocab_size))
    with Trace(rt1) as tr:
        step(0)
    model.free()
    ops = set(tr.tasks["name"])
    has_cuda = {r["name"]: bool(lib.nl_op_has_cuda(r["op"])) for r in table()}
    assert STEP_OPS[precision] <= ops, sorted(ops)
    if tiling == "whole":
        assert {"softmax_tile", "layer_norm_tile"} <= ops, sorted(ops)
        assert (precision == "bf16") == ({"gemm_bf16_c16", "cross_entropy_stats_bf16",
                                          "cross_entropy_backward_bf16"} <= ops), sorted(ops)
    assert sorted(op for op in ops if not has_cuda[op]) == []
