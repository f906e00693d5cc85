"""The ``train`` command: option parsing, defaults, resume defaults, and the whole command
end to end with ``build`` swapped for the PyTorch adapter (the tiled model is tested
elsewhere)."""
import argparse
import json
from pathlib import Path

import pytest
import torch

from nntile_lab.nn.config import GPT2Config
from nntile_lab.spec import ExperimentSpec, spec_fields
from nntile_lab.train import WarmupCosine, cli, load_checkpoint
from tests.torch_adapter import TinyConfig, TorchAdamW, TorchModel, tiny_dataset


def parse(*argv):
    parser = argparse.ArgumentParser(prog="nntile-lab")
    cli.register_cli(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", *argv])


def test_main_job_defaults():
    args = cli.resolve(parse())
    assert (args.n_layer, args.n_head, args.n_embd, args.vocab_size) == (4, 4, 256, 50257)
    assert (args.seq_len, args.batch, args.n_positions) == (128, 8, 128)
    assert (args.steps, args.warmup, args.optimizer, args.weight_decay) == (300, 30, "adamw", 0.1)
    assert (args.lr, args.min_lr, args.clip, args.grad_accum) == (1e-3, 1e-4, 1.0, 1)
    assert (args.scheduler, args.ncpu, args.data, args.resume, args.json) == (
        "lws", None, None, None, False)
    assert args.out.startswith("runs/") and args.func is cli.run_cli
    assert args.spec == ExperimentSpec()             # the one set of defaults
    assert args.spec.gpt2_config() == GPT2Config(
        n_layer=4, n_head=4, n_embd=256, vocab_size=50257, n_positions=128, batch_tile=4,
        inner_tile=512, head_tile=2, vocab_tile=8192)
    small = cli.resolve(parse("--batch", "2", "--vocab-size", "100", "--n-head", "1"))
    cfg = small.spec.gpt2_config()   # default tiles are capped at their dimension
    assert (small.spec.batch_tile, cfg.vocab_tile, cfg.head_tile) == (2, 100, 1)
    assert args.spec.schedule() == WarmupCosine(1e-3, 30, 300, 1e-4)


def test_options_are_parsed():
    args = cli.resolve(parse(
        "--steps", "50", "--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--seq-len", "32",
        "--batch", "4", "--vocab-size", "1000", "--batch-tile", "2", "--seq-tile", "16",
        "--embd-tile", "32", "--inner-tile", "64", "--head-tile", "1", "--vocab-tile", "500",
        "--lr", "3e-4", "--warmup", "5", "--min-lr", "1e-5", "--optimizer", "sgd",
        "--grad-accum", "2", "--clip", "0.5", "--seed", "7", "--data", "d", "--out", "o",
        "--checkpoint-every", "10", "--eval-every", "5", "--scheduler", "dmda", "--ncpu", "2",
        "--json"))
    assert args.spec.gpt2_config() == GPT2Config(
        n_layer=2, n_head=2, n_embd=64, vocab_size=1000, n_positions=32, batch_tile=2,
        seq_tile=16, embd_tile=32, inner_tile=64, head_tile=1, vocab_tile=500)
    assert args.weight_decay == 0.0  # sgd's default
    assert (args.steps, args.batch, args.grad_accum, args.clip, args.seed) == (50, 4, 2, 0.5, 7)
    assert (args.data, args.out, args.checkpoint_every, args.eval_every) == ("d", "o", 10, 5)
    assert (args.scheduler, args.ncpu, args.json) == ("dmda", 2, True)
    assert args.spec.schedule() == WarmupCosine(3e-4, 5, 50, 1e-5)


def test_bad_option_is_rejected(capsys):
    with pytest.raises(SystemExit):
        parse("--optimizer", "lion")
    assert "invalid choice: 'lion'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("--precision", "fp16")
    assert "invalid choice: 'fp16' (choose from 'fp32', 'bf16', 'bf16-storage', 'auto')" in \
        capsys.readouterr().err
    assert cli.resolve(parse("--precision", "bf16")).spec.precision == "bf16"
    with pytest.raises(ValueError, match=r"batch_tile=9 \(--batch-tile\) must be from 1 to "
                       r"batch=8"):
        cli.resolve(parse("--batch-tile", "9"))


def test_options_are_the_spec_fields():
    """Every spec field but the benchmark's is a ``train`` option of the same name."""
    args = parse()
    train_fields = [f.name for f in spec_fields() if f.metadata["group"] != "bench"]
    assert all(hasattr(args, name) and getattr(args, name) is None for name in train_fields)


@pytest.fixture
def torch_build(monkeypatch):
    """``build`` with the PyTorch adapter: the CLI glue runs for real, minus the tiled model."""
    def build(spec):
        cfg = TinyConfig(n_layer=spec.n_layer, n_head=spec.n_head, n_embd=spec.n_embd,
                         n_positions=spec.positions, vocab_size=spec.vocab_size)
        model = TorchModel(cfg, seed=spec.seed)
        return model, TorchAdamW(model, lr=spec.lr), spec.schedule()

    monkeypatch.setattr(cli, "build", build)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_train_command_end_to_end_and_resume(tmp_path, capsys, torch_build):
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"
    common = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--seq-len", "16",
              "--vocab-size", "64", "--batch", "4", "--lr", "1e-2", "--data", str(data),
              "--eval-every", "3", "--eval-batches", "2", "--ncpu", "1", "--no-progress"]
    assert cli.run_cli(parse(*common, "--steps", "6", "--out", str(out), "--json")) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert [r["step"] for r in lines[:-1]] == list(range(1, 7)) and lines[-1]["summary"]
    assert {"log.csv", "loss.png", "run.json", "checkpoint"} <= {p.name for p in out.iterdir()}
    rec = json.loads((out / "run.json").read_text())
    assert rec["config"]["model"]["n_embd"] == 32 and rec["config"]["runtime"]["ncpu"] == 1
    assert rec["config"]["options"]["steps"] == 6 and rec["config"]["data"] == str(data)
    assert rec["results"]["final_loss"] == lines[-1]["final_loss"]
    assert rec["results"]["steps"] == 6 and rec["results"]["tokens_per_s"] > 0
    assert rec["spec"]["n_embd"] == 32 and rec["spec"]["steps"] == 6 and rec["kind"] == "train"
    assert "avx2" in rec["machine"]["isa"] or "avx2" not in Path("/proc/cpuinfo").read_text()
    # resume: shape, seq_len and batch come from the checkpoint, the run directory is reused
    assert cli.run_cli(parse("--resume", str(out), "--steps", "9", "--data", str(data),
                             "--lr", "1e-2", "--eval-every", "3", "--eval-batches", "2",
                             "--ncpu", "1", "--no-progress")) == 0
    report = capsys.readouterr().out
    assert report.startswith(f"{out}: 9 steps, loss ") and "GFLOP/s" in report
    assert load_checkpoint(out).state["step"] == 9
    assert json.loads((out / "run.json").read_text())["results"]["steps"] == 9


def test_resume_from_missing_dir_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "gone")):
        cli.resolve(parse("--resume", str(tmp_path / "gone")))
