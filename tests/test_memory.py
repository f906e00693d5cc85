"""The memory planner: estimates against measured peaks (StarPU's accounting and the
process's RSS, each config in a fresh process), verdicts, and clear errors before
any task for settings that cannot run."""
import json

import pytest

from nntile_lab import cli, memory
from nntile_lab.bench.memory import measure
from nntile_lab.spec import ExperimentSpec

MIB = 1 << 20
CONFIGS = [dict(n_layer=2, n_embd=128, vocab_size=4096, seq_len=64, batch=4),
           dict(n_layer=4, n_embd=256, vocab_size=8192, seq_len=128, batch=4),
           dict(n_layer=2, n_embd=256, vocab_size=50257, seq_len=64, batch=4),
           dict(n_layer=4, n_embd=128, vocab_size=2048, seq_len=256, batch=8)]


def spec(**kw):
    # one worker: execution follows submission, so the peak is reproducible
    return ExperimentSpec(**({"ncpu": 1, "warmup_steps": 1, "measure_steps": 1} | kw))


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: "-".join(map(str, kw.values())))
def test_estimate_within_15_percent_of_measured_peaks(kw):
    s = spec(**kw)
    plan, measured = memory.estimate(s), measure(s)
    assert "error" not in measured, measured
    assert plan.verdict == "fits"
    # StarPU's accounting sees tiles as it allocates them; the runtime reserves tensors
    # whole (the plan's peak: tests/test_plan_is_true.py)
    assert plan.allocated_bytes == pytest.approx(measured["starpu_peak_bytes"], rel=0.15)
    assert plan.allocated_bytes <= plan.peak_bytes
    assert plan.rss_bytes == pytest.approx(measured["peak_rss_bytes"], rel=0.15)


@pytest.mark.parametrize("precision", ["bf16", "bf16-storage"])
def test_bf16_logits_planned_as_measured(precision):
    """A step whose peak is the head's logits and their gradient (B·T·V against small
    blocks): the bf16 modes store both in bf16, the gradient (kept from the forward, where
    the cross-entropy computes it) in half fp32's bytes, and StarPU's measured peak agrees
    with the plan."""
    kw = dict(n_layer=2, n_embd=128, vocab_size=8192, seq_len=256, batch=4)
    s = spec(**kw, precision=precision)
    plan, measured = memory.estimate(s), measure(s)
    assert "error" not in measured, measured
    fp32 = memory.estimate(spec(**kw)).categories["activations"]
    assert fp32 - plan.categories["activations"] >= 2 * 4 * 256 * 8192
    assert plan.allocated_bytes == pytest.approx(measured["starpu_peak_bytes"], rel=0.15)
    assert plan.rss_bytes == pytest.approx(measured["peak_rss_bytes"], rel=0.15)


def test_out_of_core_run_keeps_the_process_under_its_cap(tmp_path):
    """A process cap of 90 MiB over the process's own base (250 MiB without an OpenCL
    platform) on a model whose in-memory run peaks ~140 MiB over it."""
    s = spec(**CONFIGS[1], vocab_tile=2048)
    cap_mb = memory.process_base_bytes() // MIB + 90
    limit = memory.starpu_limit_mb(cap_mb, s)
    s = s.replace(memory_limit_mb=limit, ooc_dir=str(tmp_path), ooc_size_mb=512)
    assert memory.check(s).verdict == "fits_with_disk"
    res = measure(s)
    assert "error" not in res, res
    assert res["peak_rss_bytes"] <= cap_mb * MIB, res
    assert res["starpu_peak_bytes"] <= limit * MIB
    assert res["disk_read_per_step"] > 0 and res["disk_written_per_step"] > 0


def test_verdicts_and_reasons(tmp_path):
    base = spec(n_layer=2, n_embd=256, vocab_size=8192, seq_len=64, batch=4, vocab_tile=2048)
    plan = memory.estimate(base)
    assert plan.verdict == "fits" and plan.disk_bytes == 0
    assert set(plan.categories) == set(memory.CATEGORIES)
    assert plan.peak_bytes == sum(plan.categories.values())
    n = base.gpt2_config().num_params(with_positions=True)
    assert plan.categories["optimizer_state"] == 2 * plan.categories["parameters"] == 8 * n
    assert memory.estimate(base, optimizer="sgd").categories["optimizer_state"] == 4 * n
    # the same from a GPT2Config with batch and seq_len
    same = memory.estimate(base.gpt2_config(), batch=4, seq_len=64, ncpu=2)
    assert same.peak_bytes == plan.peak_bytes
    cap = plan.peak_bytes // MIB // 2
    over = base.replace(memory_limit_mb=cap)
    assert "no out-of-core directory" in memory.estimate(over).reason
    ok = memory.estimate(over.replace(ooc_dir=str(tmp_path), ooc_size_mb=4096))
    assert ok.verdict == "fits_with_disk" and ok.disk_bytes >= plan.peak_bytes
    small = memory.estimate(over.replace(ooc_dir=str(tmp_path), ooc_size_mb=16))
    assert small.verdict == "cannot_run" and "--ooc-size-mb 16 is too small" in small.reason
    ro = tmp_path / "ro"
    ro.write_text("a file, not a directory")
    bad = memory.estimate(over.replace(ooc_dir=str(ro / "x"), ooc_size_mb=4096))
    assert bad.verdict == "cannot_run" and "not writable" in bad.reason
    tiny = memory.estimate(base.replace(memory_limit_mb=16, ooc_dir=str(tmp_path),
                                        vocab_tile=8192))
    assert tiny.verdict == "cannot_run" and "largest task" in tiny.reason
    with pytest.raises(memory.MemoryPlanError, match="largest task"):
        memory.check(base.replace(memory_limit_mb=16, ooc_dir=str(tmp_path), vocab_tile=8192))


def test_train_cli_fails_before_starting(tmp_path, capsys):
    rc = cli.main(["train", "--n-layer", "1", "--n-embd", "64", "--vocab-size", "8192",
                   "--seq-len", "64", "--batch", "4", "--memory-limit-mb", "16",
                   "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    # a run that cannot fit is the work failing, not a malformed command line: exit 1
    assert rc == 1 and "cannot run under these memory settings" in err, err
    assert not (tmp_path / "run").exists()


def test_plan_cli(tmp_path, capsys):
    args = ["plan", "--n-layer", "2", "--n-embd", "256", "--vocab-size", "8192",
            "--seq-len", "64", "--batch", "4", "--vocab-tile", "1024", "--memory-limit-mb", "32"]
    assert cli.main(args + ["--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "cannot_run" and "--ooc-dir" in out["reason"]
    assert cli.main(args + ["--ooc-dir", str(tmp_path), "--ooc-size-mb", "1024"]) == 0
    text = capsys.readouterr().out
    assert "verdict: fits_with_disk" in text and "optimizer_state" in text


def test_device_part_of_the_plan(monkeypatch):
    """With OpenCL devices capped: each holds at most its cap, the rest of the peak spills
    to RAM, and twice the largest task that may run on a device (StarPU's OpenCL worker
    holds two tasks' tiles) must fit under the cap."""
    base = spec(n_layer=2, n_embd=256, vocab_size=8192, seq_len=64, batch=4, vocab_tile=2048)
    ram = memory.estimate(base)
    assert ram.device is None
    plan = memory.estimate(base.replace(nopencl=1, opencl_memory_limit_mb=16))
    assert plan.verdict == "fits" and plan.peak_bytes == ram.peak_bytes
    dev = plan.device
    assert (dev.resident_bytes, dev.spill_bytes) == (16 * MIB, ram.allocated_bytes - 16 * MIB)
    assert (dev.largest_task_bytes, dev.largest_task) == (8 * MIB, "optimizer update")
    assert "spilled to RAM" in plan.report() and "cap 16 MiB each" in plan.report()
    two = memory.estimate(base, nopencl=2, opencl_memory_limit_mb=32)   # keywords too
    assert two.device.resident_bytes == 64 * MIB
    assert two.device.spill_bytes == ram.allocated_bytes - 64 * MIB
    roomy = memory.estimate(base, nopencl=1, opencl_memory_limit_mb=4096)
    assert (roomy.device.resident_bytes, roomy.device.spill_bytes) == (ram.allocated_bytes, 0)
    # a cap below the largest task: cannot run, the reason names cap, task and fixes
    bad = memory.estimate(base.replace(vocab_tile=8192), nopencl=1, opencl_memory_limit_mb=16)
    assert bad.verdict == "cannot_run"
    assert ("--opencl-memory-limit-mb 16 is below 2 × the largest task that may run on the "
            "OpenCL device: 32.0 MiB of tiles at once (optimizer update), and the OpenCL "
            "worker holds 2 tasks' tiles at once; raise --opencl-memory-limit-mb to at least "
            "64, or use smaller tiles") in bad.reason
    with pytest.raises(memory.MemoryPlanError, match="opencl-memory-limit-mb 16 is below"):
        memory.check(base.replace(vocab_tile=8192, nopencl=1, opencl_memory_limit_mb=16))
    # only tasks whose op has an OpenCL implementation count: the rest run on the CPU
    monkeypatch.setattr(memory, "device_ops", lambda: {"gemm"})
    gemm_only = memory.estimate(base.replace(vocab_tile=8192), nopencl=1,
                                opencl_memory_limit_mb=16)
    assert gemm_only.device.largest_task.endswith("gemm")
    assert gemm_only.device.largest_task_bytes < 32 * MIB
    monkeypatch.setattr(memory, "device_ops", lambda: set())
    none = memory.estimate(base.replace(vocab_tile=8192), nopencl=1, opencl_memory_limit_mb=16)
    assert none.verdict == "fits" and none.device.largest_task == "none"


def test_bytes_per_precision():
    """bf16 modes: the saved activations a GEMM or the GELU reads at 2 bytes, the GEMM
    weights' bf16 copies under bf16 only; gradients and optimizer state float32 in every
    mode; auto plans as fp32 (its mode is chosen when the run starts). The planner reads
    the model; the closed forms here are written out independently."""
    spec = ExperimentSpec(n_layer=2, n_embd=64, n_head=2, vocab_size=500, seq_len=32, batch=2)
    cats = {p: memory.estimate(spec.replace(precision=p)).categories
            for p in ("fp32", "bf16", "bf16-storage", "auto")}
    cfg = spec.gpt2_config()
    B, T, E, F, V, L = 2, 32, cfg.n_embd, cfg.n_inner, 500, 2
    assert memory.gemm_weight_elements(cfg) == V * E + L * (4 * E * E + 2 * E * F)
    assert cats["bf16"]["parameters"] == (cats["fp32"]["parameters"]
                                          + 2 * memory.gemm_weight_elements(cfg))
    assert cats["bf16-storage"]["parameters"] == cats["fp32"]["parameters"]
    assert cats["auto"] == cats["fp32"]
    # halved: per block the attention's input, q, k, v and merged heads, the MLP's input,
    # hidden tile and GELU; the head's input; and the logits' gradient (n_embd one tile)
    halved = L * (6 * B * T * E + 2 * B * T * F) + B * T * E + B * T * V
    for p in ("bf16", "bf16-storage"):
        assert cats[p]["activations"] == cats["fp32"]["activations"] - 2 * halved
        for k in ("gradients", "optimizer_state"):
            assert cats[p][k] == cats["fp32"][k]
    with pytest.raises(ValueError, match=r"precision='fp8' is unknown; valid ones: fp32, bf16, "
                                         r"bf16-storage, auto"):
        memory.estimate(cfg, batch=2, seq_len=32, precision="fp8")


def test_the_machines_ram_is_a_cap_even_when_none_is_given(monkeypatch, tmp_path, capsys):
    """n_embd=65536 with no cap (3 TB of tiles) was planned "fits": a widget would have
    started it. The machine's RAM (or its cgroup's limit) is a cap; so is the disk's free
    space out of core (checked there already)."""
    huge = ExperimentSpec(n_embd=65536, n_head=64)
    plan = memory.estimate(huge)                     # this machine: far below 3 TB
    assert plan.verdict == "cannot_run" and "GiB of RAM" in plan.reason
    assert "but this machine has" in plan.reason and "--ooc-dir" in plan.reason
    assert cli.main(["plan", "--n-embd", "65536", "--n-head", "64"]) == 1
    assert "this machine has" in capsys.readouterr().out
    with pytest.raises(memory.MemoryPlanError, match="this machine has"):
        memory.check(huge)
    # a small machine, faked: the main job's 700 MiB do not fit in 512 MiB of RAM, out of
    # core under a cap that fits they do, and a cap above the machine's RAM is refused
    monkeypatch.setattr(memory, "machine_ram_bytes", lambda: 512 << 20)
    main = ExperimentSpec()
    assert memory.estimate(main).verdict == "cannot_run"
    ooc = main.replace(memory_limit_mb=128, ooc_dir=str(tmp_path), ooc_size_mb=4096)
    assert memory.estimate(ooc).verdict == "fits_with_disk"
    big_cap = ooc.replace(memory_limit_mb=100_000)
    assert memory.estimate(big_cap).verdict == "cannot_run"
    assert "lower --memory-limit-mb to" in memory.estimate(big_cap).reason
    monkeypatch.setattr(memory, "machine_ram_bytes", lambda: None)   # unknown: no check
    assert memory.estimate(main).verdict == "fits"


def test_machine_ram_reads_the_cgroup_limit(monkeypatch):
    real = memory.machine_ram_bytes()
    assert real is None or real > 256 << 20
    import builtins
    opened = builtins.open

    def fake_open(path, *a, **k):
        if str(path) == "/sys/fs/cgroup/memory.max":
            import io
            return io.StringIO(str(300 << 20))
        return opened(path, *a, **k)
    monkeypatch.setattr(builtins, "open", fake_open)
    assert memory.machine_ram_bytes() == 300 << 20


def test_a_file_as_the_ooc_dir_is_named_as_a_file(tmp_path):
    """plan --ooc-dir <a file> said "not writable (File exists)"."""
    f = tmp_path / "a_file"
    f.write_text("x")
    plan = memory.estimate(ExperimentSpec(memory_limit_mb=100, ooc_dir=str(f)))
    assert plan.verdict == "cannot_run"
    assert plan.reason == (f"--ooc-dir {f} is a file, not a directory: give a directory for "
                           "the disk node's files (it is created if missing)")


def test_plan_of_auto_sizes_the_mode_a_run_takes_here(monkeypatch, capsys):
    """plan --precision auto sized fp32 (63.9 MiB) where auto picks bf16 (57.5 MiB): it
    chooses as train does (the measured GEMM peaks) and sizes that mode."""
    from nntile_lab import experiment
    for mode in ("bf16", "fp32", "bf16-storage"):
        monkeypatch.setattr(experiment, "choose_precision",
                            lambda spec, mode=mode: (mode, f"measured: {mode}"))
        assert cli.main(["plan", "--precision", "auto", "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        want = memory.estimate(ExperimentSpec(precision=mode))
        assert got["peak_bytes"] == want.peak_bytes and got["details"]["precision"] == mode
        assert got["details"]["precision_auto"] == {"mode": mode, "why": f"measured: {mode}"}
    assert cli.main(["plan", "--precision", "auto"]) == 0
    assert capsys.readouterr().out.startswith("precision auto -> bf16-storage on this machine: "
                                              "measured: bf16-storage")
