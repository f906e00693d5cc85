"""``nntile-lab train`` faced with mistakes: resuming takes the checkpoint's data (other
data only on request), a resume with nothing left to do changes nothing, and bad
options name the option. The model is the PyTorch adapter (the CLI glue runs for real)."""
import pandas as pd
import pytest

from nntile_lab import cli as main_cli
from nntile_lab import data as data_module
from nntile_lab.train import cli
from tests.torch_adapter import tiny_dataset
from tests.train.test_cli import parse

COMMON = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--seq-len", "16",
          "--vocab-size", "64", "--batch", "4", "--lr", "1e-2", "--eval-every", "0",
          "--ncpu", "1", "--no-progress", "--checkpoint-every", "3"]


@pytest.fixture
def no_default_corpus(monkeypatch):
    def refuse():
        raise AssertionError("the default corpus was used")
    monkeypatch.setattr(data_module, "prepare_default_corpus", refuse)


def snapshot(out):
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_resume_trains_on_the_checkpoints_data(tmp_path, torch_build, no_default_corpus,
                                                capsys):
    data = tiny_dataset(tmp_path / "data")
    for name, given in (("explicit", ["--data", str(data)]), ("implicit", [])):
        out = tmp_path / name
        assert cli.run_cli(parse(*COMMON, "--data", str(data), "--steps", "3",
                                 "--out", str(out))) == 0
        assert cli.run_cli(parse("--resume", str(out), *given, "--steps", "6", "--lr", "1e-2",
                                 "--eval-every", "0", "--ncpu", "1", "--no-progress")) == 0
    implicit = pd.read_csv(tmp_path / "implicit" / "log.csv")["loss"]
    assert len(implicit) == 6
    pd.testing.assert_series_equal(implicit, pd.read_csv(tmp_path / "explicit" / "log.csv")
                                   ["loss"])


def test_resume_on_other_data_needs_the_flag(tmp_path, torch_build, capsys):
    data, other = tiny_dataset(tmp_path / "data"), tiny_dataset(tmp_path / "other", seed=1)
    out = tmp_path / "run"
    assert cli.run_cli(parse(*COMMON, "--data", str(data), "--steps", "3",
                             "--out", str(out))) == 0
    before = snapshot(out)
    with pytest.raises(ValueError, match=r"--data .*other differs from the data the checkpoint "
                                         r"was trained on .*data\).*--allow-data-change"):
        cli.run_cli(parse(*COMMON, "--resume", str(out), "--data", str(other), "--steps", "6"))
    assert snapshot(out) == before
    assert cli.run_cli(parse(*COMMON, "--resume", str(out), "--data", str(other),
                             "--steps", "6", "--allow-data-change")) == 0
    assert len(pd.read_csv(out / "log.csv")) == 6


def test_resume_with_no_steps_left_changes_nothing(tmp_path, torch_build, capsys):
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"
    assert cli.run_cli(parse(*COMMON, "--data", str(data), "--steps", "3",
                             "--out", str(out))) == 0
    capsys.readouterr()
    before = snapshot(out)
    for steps in ("3", "2"):
        assert cli.run_cli(parse("--resume", str(out), "--steps", steps, "--ncpu", "1")) == 0
        said = capsys.readouterr().out
        assert f"is at step 3; --steps {steps} asks for no more: nothing to do" in said
        assert snapshot(out) == before


def test_resume_with_no_steps_left_restores_a_log_the_kill_left_behind(tmp_path, torch_build,
                                                                         capsys):
    """kill -9 between the last checkpoint and log.csv: the checkpoint is the truth."""
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"
    assert cli.run_cli(parse(*COMMON, "--data", str(data), "--steps", "3",
                             "--out", str(out))) == 0
    whole = (out / "log.csv").read_text()
    (out / "log.csv").write_text("\n".join(whole.splitlines()[:2]) + "\n")  # one row
    capsys.readouterr()
    assert cli.run_cli(parse("--resume", str(out), "--steps", "3", "--ncpu", "1")) == 0
    assert "log.csv (restored from the checkpoint)" in capsys.readouterr().out
    assert (out / "log.csv").read_text() == whole


def test_out_naming_a_file_is_a_clear_error(tmp_path, torch_build):
    data, f = tiny_dataset(tmp_path / "data"), tmp_path / "afile"
    f.write_text("mine")
    with pytest.raises(ValueError, match=r"--out .*afile is a file, not a directory"):
        cli.run_cli(parse(*COMMON, "--data", str(data), "--steps", "2", "--out", str(f)))
    assert f.read_text() == "mine"


@pytest.mark.parametrize("option,value", [("--batch", "0"), ("--steps", "-1")])
def test_bad_numbers_name_the_users_option(tmp_path, capsys, option, value):
    code = main_cli.main(["train", option, value, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and f"({option})" in err and "must be ≥ 1" in err
    assert not (tmp_path / "run").exists()


def test_disk_full_is_a_clear_error(tmp_path, torch_build, monkeypatch, capsys):
    import errno
    import os

    from nntile_lab.train import checkpoint, trainer
    data, out = tiny_dataset(tmp_path / "data"), tmp_path / "run"

    def full(path, arrays):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = checkpoint._write_npz
    monkeypatch.setattr(checkpoint, "_write_npz", full)
    code = main_cli.main(["train", *COMMON, "--data", str(data), "--steps", "3",
                          "--out", str(out)])
    err = capsys.readouterr().err
    # the work failed (exit 1), the command line was fine
    assert code == 1 and "could not write checkpoint file" in err and "model.npz" in err
    assert "No space left on device" in err and "Traceback" not in err
    monkeypatch.setattr(checkpoint, "_write_npz", real)   # (undo() would drop torch_build)
    monkeypatch.setattr(trainer, "atomic_write_text", lambda *a: full(None, None))
    code = main_cli.main(["train", *COMMON, "--data", str(data), "--steps", "3",
                          "--out", str(tmp_path / "run2")])
    err = capsys.readouterr().err
    assert code == 1 and "log.csv: No space left on device" in err, err
