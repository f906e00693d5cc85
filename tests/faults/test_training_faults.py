"""``nntile-lab train`` under SIGINT and kill -9, during steps and inside checkpoint
writes: SIGINT exits with code 130 keeping the last checkpoint whole; after kill -9 the
next run cleans the temporary files up and a resumed run gives exactly the losses of an
uninterrupted one. Every child process has a time limit."""
import json
import random
import signal
import time

import numpy as np
import pandas as pd
import pytest

from nntile_lab.train.checkpoint import load_checkpoint
from tests.faults._proc import HERE, finish, read_until, spawn
from tests.torch_adapter import tiny_dataset

STEPS = 8
MODEL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--vocab-size", "64",
         "--seq-len", "16", "--batch", "4", "--eval-every", "0", "--checkpoint-every", "2",
         "--ncpu", "2", "--json", "--no-progress", "--lr", "3e-3"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tiny_dataset(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """The losses of an uninterrupted run."""
    out = tmp_path_factory.mktemp("reference")
    code, _, err = finish(train(data, out), timeout=120)
    assert code == 0, err[-2000:]
    return losses(out)


def train(data, out, stall_at=0, steps=STEPS, resume=False):
    argv = ["train", *MODEL, "--steps", str(steps), "--data", str(data), "--out", str(out)]
    if resume:
        argv += ["--resume", str(out)]
    return spawn(str(HERE / "train_child.py"), str(stall_at), "--", *argv)


def losses(out):
    return pd.read_csv(out / "log.csv")["loss"].to_numpy()


def leftovers(out):
    return sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")
                  or p.name == "checkpoint.old")


def step_line(min_step):
    return lambda line: line.startswith("{") and json.loads(line).get("step", 0) >= min_step


def resume_and_compare(data, out, reference):
    code, _, err = finish(train(data, out, resume=True), timeout=120)
    assert code == 0, err[-2000:]
    assert leftovers(out) == []
    np.testing.assert_array_equal(losses(out), reference)


def test_sigint_exits_130_and_keeps_the_checkpoint(data, tmp_path, reference):
    rng = random.Random(1)
    resumed = 0
    for trial in range(4):
        out = tmp_path / f"run{trial}"
        proc = train(data, out)
        read_until(proc, step_line(rng.randint(1, 5)), timeout=120)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code, _, err = finish(proc, timeout=30)
        if code == 0:   # it finished before the signal landed
            continue
        assert code == 130, f"trial {trial}: exit {code}: {err[-2000:]}"
        assert time.monotonic() - sent < 10, "slow to stop"
        assert "Traceback" not in err and "interrupted" in err, err[-2000:]
        assert leftovers(out) == []
        if (out / "checkpoint").exists():   # whole and verified
            assert load_checkpoint(out).state["step"] % 2 == 0
            resume_and_compare(data, out, reference)
            resumed += 1
    assert resumed, "no trial left a checkpoint to resume from"


def test_kill_9_inside_checkpoint_write_then_resume_is_exact(data, tmp_path, reference):
    out = tmp_path / "run"
    proc = train(data, out, stall_at=2)   # the step-4 checkpoint, half written
    read_until(proc, lambda line: line.startswith("STALLED"), timeout=120)
    proc.send_signal(signal.SIGKILL)
    finish(proc, timeout=30)
    assert [p for p in leftovers(out) if p.startswith(".checkpoint.")], "no half-written dir"
    assert load_checkpoint(out).state["step"] == 2   # the previous one is untouched
    resume_and_compare(data, out, reference)


def test_kill_9_at_random_moments_then_resume_is_exact(data, tmp_path, reference):
    rng = random.Random(2)
    resumed = 0
    for trial in range(3):
        out = tmp_path / f"run{trial}"
        proc = train(data, out)
        read_until(proc, step_line(rng.randint(2, 7)), timeout=120)
        time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        finish(proc, timeout=30)
        if not (out / "checkpoint").exists() and not (out / "checkpoint.old").exists():
            continue   # killed before the first checkpoint: nothing to resume
        resume_and_compare(data, out, reference)
        resumed += 1
    assert resumed, "no trial left a checkpoint to resume from"
