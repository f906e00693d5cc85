"""Resume is faithful: ``train --steps 3`` then ``--resume --steps 6`` keeps the original
learning-rate schedule (its tail) and says so; ``--reschedule`` switches to the stretched
one and says what changes; a checkpoint without a recorded schedule is refused unless
--reschedule. Checked with the learning rate of every step in log.csv."""
import csv

import pytest

from nntile_lab.train import WarmupCosine, cli
from nntile_lab.train.checkpoint import load_checkpoint, save_checkpoint
from tests.torch_adapter import tiny_dataset
from tests.train.test_cli import parse, torch_build  # noqa: F401

LR, MIN_LR = 1e-2, 1e-4


def common(data):
    return ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--seq-len", "16",
            "--vocab-size", "64", "--batch", "4", "--lr", str(LR), "--min-lr", str(MIN_LR),
            "--warmup", "1", "--data", str(data), "--eval-every", "0", "--ncpu", "1",
            "--no-progress"]


def lrs(out):
    with open(out / "log.csv") as f:
        return [float(r["lr"]) for r in csv.DictReader(f)]


@pytest.fixture
def three_steps(tmp_path, torch_build):  # noqa: F811
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"
    assert cli.run_cli(parse(*common(data), "--steps", "3", "--out", str(out))) == 0
    return data, out


def test_resume_with_more_steps_keeps_the_original_schedule(three_steps, capsys):
    data, out = three_steps
    capsys.readouterr()
    assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "6")) == 0
    original = WarmupCosine(LR, 1, 3, MIN_LR)
    assert lrs(out) == pytest.approx([original(s) for s in range(6)], rel=1e-12)
    assert lrs(out)[3:] == [MIN_LR] * 3        # the tail, not a jump back up
    err = capsys.readouterr().err
    assert "keeping the checkpoint's learning-rate schedule" in err
    assert "--reschedule" in err and "total_steps" not in err


def test_reschedule_switches_and_says_what_changes(three_steps, capsys):
    data, out = three_steps
    capsys.readouterr()
    assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "6",
                             "--reschedule")) == 0
    original, stretched = WarmupCosine(LR, 1, 3, MIN_LR), WarmupCosine(LR, 1, 6, MIN_LR)
    assert lrs(out) == pytest.approx([original(s) for s in range(3)]
                                     + [stretched(s) for s in range(3, 6)], rel=1e-12)
    err = capsys.readouterr().err
    assert "--reschedule: the learning-rate schedule changes" in err
    assert f"step 4 gets lr {stretched(3):.3g} instead of {original(3):.3g}" in err


def test_same_schedule_resumes_silently(three_steps, capsys):
    data, out = three_steps
    ckpt = load_checkpoint(out)   # a checkpoint at step 2 of the same 3-step schedule
    state = dict(ckpt.state, step=2, log=ckpt.state["log"][:2])
    save_checkpoint(out, ckpt.model_state, ckpt.optimizer_state, state)
    capsys.readouterr()
    assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "3")) == 0
    assert "schedule" not in capsys.readouterr().err


def test_a_checkpoint_without_its_schedule_is_refused_unless_rescheduled(three_steps):
    data, out = three_steps
    ckpt = load_checkpoint(out)
    settings = {k: v for k, v in ckpt.state["settings"].items() if k != "schedule"}
    save_checkpoint(out, ckpt.model_state, ckpt.optimizer_state,
                    dict(ckpt.state, settings=settings))
    with pytest.raises(ValueError, match="does not record its learning-rate schedule.*"
                                         "--reschedule"):
        cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "6"))
    assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "6",
                             "--reschedule")) == 0


def test_reschedule_without_resume_is_a_usage_error(tmp_path):
    with pytest.raises(ValueError, match="--reschedule applies only with --resume"):
        cli.run_cli(parse(*common(tmp_path), "--steps", "3", "--reschedule"))


def test_a_bf16_run_resumes_in_bf16(tmp_path, capsys):
    """`train --resume` without --precision continued a bf16 run in fp32: the checkpoint
    keeps the mode it trained in, and a resume continues in it (a different --precision
    given says so)."""
    import json
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"
    assert cli.run_cli(parse(*common(data), "--steps", "2", "--out", str(out),
                             "--precision", "bf16")) == 0
    assert load_checkpoint(out).state["settings"]["precision"] == "bf16"
    assert cli.resolve(parse(*common(data), "--resume", str(out))).precision == "bf16"
    assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "3")) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["precision"]["mode"] == "bf16"
    assert record["spec"]["precision"] == "bf16"
    # an older checkpoint, without the mode in its settings: run.json says it
    ckpt = load_checkpoint(out)
    del ckpt.state["settings"]["precision"]
    save_checkpoint(out / "old", ckpt.model_state, ckpt.optimizer_state, ckpt.state)
    (out / "old" / "run.json").write_text((out / "run.json").read_text())
    assert cli.resolve(parse(*common(data), "--resume", str(out / "old"))).precision == "bf16"
    capsys.readouterr()
    with pytest.warns(UserWarning, match="precision bf16 -> fp32"):
        assert cli.run_cli(parse(*common(data), "--resume", str(out), "--steps", "4",
                                 "--precision", "fp32")) == 0
