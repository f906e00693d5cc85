"""The planner's verdict is what the run does (issues 27 and 33): ``plan``'s peak is the bytes
``Runtime.reserve`` holds at the run's worst allocation (tensors whole, from creation to
free: model, optimizer state, steps, evaluation), so "fits" at a cap of ⌈peak⌉ MiB trains,
a cap clearly below is refused before any task, and "fits_with_disk" with the disk node the
plan asks for trains out of core. GPT-2 and the Llama, tilings drawn from the test's seed.

(The plan once counted tiles, as StarPU allocates them, while the runtime reserves whole
tensors: it said "fits" at 63 MiB for a run that needed 75, the head's logits and their
gradient held at once.)"""
import json
import math

import numpy as np
import pytest

from nntile_lab import cli, experiment, memory
from nntile_lab.runtime import Runtime
from nntile_lab.spec import ExperimentSpec
from tests.torch_adapter import tiny_dataset

MIB = 1 << 20
CASES = [("gpt2", 27), ("llama", 33)]


def small_spec(model: str, seed: int) -> dict:
    """A model of tens of MiB (the runtime's smallest cap is 16 MiB: a cap clearly below
    the peak must be one), its depth, vocabulary, tiles, precision mode and gradient
    accumulation drawn from ``seed``; one worker."""
    rng = np.random.default_rng(seed)
    seq, vocab = 32, int(rng.integers(14_000, 20_000))
    inner = 256 if model == "gpt2" else 192
    spec = dict(model=model, n_layer=int(rng.integers(1, 3)), n_head=2, n_embd=64,
                n_inner=inner, vocab_size=vocab, seq_len=seq, batch=2, ncpu=1,
                batch_tile=int(rng.integers(1, 3)), seq_tile=int(rng.choice([8, 16, 32])),
                inner_tile=int(rng.choice([64, 128, inner])),
                vocab_tile=int(rng.integers(vocab // 3, vocab + 1)))
    if model == "llama":
        spec["n_kv_head"] = int(rng.choice([1, 2]))
    spec["precision"] = str(rng.choice(["fp32", "bf16", "bf16-storage"]))
    spec["grad_accum"] = int(rng.integers(1, 3))
    return spec


def options(spec: dict) -> list[str]:
    return [a for k, v in spec.items() for a in (f"--{k.replace('_', '-')}", str(v))]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"))


@pytest.mark.parametrize("model,seed", CASES)
def test_planned_peak_is_what_the_runtime_holds_at_its_worst_allocation(monkeypatch, model,
                                                                        seed):
    spec = ExperimentSpec(**small_spec(model, seed))
    plan = memory.estimate(spec)
    worst = []
    reserve = Runtime.reserve

    def counting(self, nbytes, tile_bytes, what):
        self.wait()   # the tensors freed so far released: what the runtime holds in order
        worst.append(self.tile_bytes + nbytes)
        return reserve(self, nbytes, tile_bytes, what)
    monkeypatch.setattr(Runtime, "reserve", counting)
    with experiment.runtime(spec) as rt:
        model_, optimizer, _ = experiment.build(spec)
        rng = np.random.default_rng(seed)
        batches = experiment.RandomTokens(spec.vocab_size)
        for _ in range(2):
            experiment.train_step(model_, optimizer, batches, rng, batch=spec.batch,
                                  seq_len=spec.seq_len, grad_accum=spec.grad_accum, lr=1e-3,
                                  clip_norm=1.0)
            rt.wait()
        model_.loss(*batches.sample_batch(spec.batch, spec.seq_len, rng))
    assert plan.peak_bytes == max(worst), (plan.report(), max(worst))
    assert plan.peak_bytes == sum(plan.categories.values())
    # StarPU allocates tile by tile: fewer bytes at once than the runtime reserves
    assert 0 < plan.allocated_bytes <= plan.peak_bytes


def _train(data, out, spec: dict, *extra) -> int:
    return cli.main(["train", *options(spec), "--steps", "2", "--eval-every", "2",
                     "--eval-batches", "1", "--checkpoint-every", "0", "--data", str(data),
                     "--out", str(out), "--json", "--no-progress", *extra])


def _steps(out: str) -> list[int]:
    return [r["step"] for r in map(json.loads, out.splitlines()[:-1])]


@pytest.mark.parametrize("model,seed", CASES)
def test_fits_at_its_peak_trains_below_is_refused_and_with_disk_trains(data, tmp_path,
                                                                       capsys, model, seed):
    spec = small_spec(model, seed)
    peak = memory.estimate(ExperimentSpec(**spec)).peak_bytes
    cap = math.ceil(peak / MIB)
    assert memory.estimate(ExperimentSpec(**spec, memory_limit_mb=cap)).verdict == "fits"
    assert _train(data, tmp_path / "fits", spec, "--memory-limit-mb", str(cap)) == 0, \
        capsys.readouterr().err
    assert _steps(capsys.readouterr().out) == [1, 2]

    below = math.floor(0.85 * peak / MIB)
    assert below >= 16, "the model is too small for a cap below its peak"
    plan = memory.estimate(ExperimentSpec(**spec, memory_limit_mb=below))
    assert plan.verdict == "cannot_run"
    assert _train(data, tmp_path / "below", spec, "--memory-limit-mb", str(below)) == 1
    err = capsys.readouterr().err.strip()
    assert "cannot run under these memory settings" in err and "\n" not in err, err
    assert not (tmp_path / "below").exists()

    # out of core: the smallest RAM cap the plan takes, the disk node it asks for
    ooc = dict(memory_limit_mb=max(16, math.ceil(plan.largest_task_bytes / MIB)),
               ooc_dir=str(tmp_path / "disk"))
    disk = memory.estimate(ExperimentSpec(**spec, **ooc, ooc_size_mb=1 << 20)).disk_bytes
    ooc["ooc_size_mb"] = disk // MIB
    assert memory.estimate(ExperimentSpec(**spec, **ooc)).verdict == "fits_with_disk"
    assert _train(data, tmp_path / "ooc", spec, *options(ooc)) == 0, capsys.readouterr().err
    assert _steps(capsys.readouterr().out) == [1, 2]
