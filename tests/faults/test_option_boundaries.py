"""Named cases of issue 21 §6: the planner agrees with Runtime on the 16 MiB floor; a
million-point sweep is refused with its count and time unless --yes; output folders are
checked before any measuring; file-system errors are one sentence naming the path and
the fix; messages name the command's own options, never internal names."""
from __future__ import annotations

import errno
import importlib

import pytest

from nntile_lab import cli
from nntile_lab.errors import os_error_message
from nntile_lab.memory import estimate
from nntile_lab.spec import ExperimentSpec


class Reached(Exception):
    pass


@pytest.fixture
def no_sweep_work(monkeypatch):
    def reached(*_a, **_k):
        raise Reached
    monkeypatch.setattr(importlib.import_module("nntile_lab.sweep.cli"), "run", reached)


def main(capsys, *argv):
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--batch", "3000"], ["--batch", "100000"],
                                  ["--n-layer", "40", "--batch", "200", "--batch-tile", "1"]])
def test_a_step_of_too_many_tasks_is_refused_in_one_line_not_dry_run(capsys, argv):
    """Sizes whose step is hundreds of thousands of tasks: one line naming the sizes and
    the fix, before the dry run holds gigabytes (a fuzzed --batch 10^5 reached 24 GiB)."""
    rc, err = main(capsys, "plan", *argv)
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert "more than 250,000 tasks" in err and "use larger tiles (--batch-tile" in err, err
    assert f"batch={argv[argv.index('--batch') + 1]} sequences" in err, err


def test_the_planner_never_says_fits_for_a_cap_runtime_refuses(capsys):
    plan = estimate(ExperimentSpec(n_layer=1, n_embd=64, n_head=1, vocab_size=64),
                    memory_limit_mb=1)
    assert plan.verdict == "cannot_run" and "below 16 MiB" in plan.reason
    rc, err = main(capsys, "plan", "--memory-limit-mb", "1")
    assert rc == 2 and "memory_limit_mb=1 (--memory-limit-mb) must be ≥ 16" in err


def test_the_planners_disk_leaves_the_runtimes_reserve(tmp_path):
    """What the planner calls fits_with_disk, Runtime's guard admits: RAM cap + disk node
    hold the peak plus (workers + 1) working sets of the largest task (cases where that,
    not the planner's 10 % disk margin, sets the disk node's size)."""
    for ncpu, embd, vocab_tile in ((1, 192, 4096), (1, 256, 4096), (2, 128, 4096)):
        spec = ExperimentSpec(n_layer=1, n_embd=embd, n_head=2, vocab_size=8192,
                              vocab_tile=vocab_tile, seq_len=32, batch=4, ncpu=ncpu,
                              memory_limit_mb=16, ooc_dir=str(tmp_path))
        plan = estimate(spec, ooc_size_mb=1 << 20)
        assert plan.verdict == "fits_with_disk", plan.reason
        room = 16 * 2**20 + plan.disk_bytes - plan.peak_bytes
        assert room >= (ncpu + 1) * plan.largest_task_bytes
        assert plan.disk_bytes > 1.1 * plan.peak_bytes   # the reserve set it


def test_a_million_point_sweep_is_refused_with_its_size_unless_confirmed(capsys,
                                                                         no_sweep_work):
    axes = ["--batch-tile", "1:128:1", "--seq-tile", "1:32:1", "--embd-tile", "1:256:1"]
    rc, err = main(capsys, "sweep", *axes)
    assert rc == 2 and "this sweep has 1,048,576 points" in err and "days" in err
    assert "--yes" in err
    with pytest.raises(Reached):   # confirmed: it would start (the grid is built first)
        cli.main(["sweep", "--batch", "8", "--batch-tile", "1:8:1", "--seq-tile",
                  "16:128:16", "--embd-tile", "32:256:32", "--yes"])


def test_sweep_output_folder_is_checked_before_measuring(tmp_path, capsys, no_sweep_work):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, err = main(capsys, "sweep", "--n-layer", "1", "--out", str(blocker / "sub"))
    assert rc == 2 and "--out" in err and str(blocker) in err and "[Errno" not in err


@pytest.mark.parametrize("code,words", [
    (errno.ENOENT, "does not exist: create it"), (errno.EACCES, "permission denied"),
    (errno.ENOSPC, "the disk is full: free some space"), (errno.EROFS, "read-only"),
    (errno.ENOTDIR, "a file where a folder should be"), (errno.EIO, "check the path")])
def test_file_system_errors_are_one_sentence_with_the_path_and_the_fix(code, words):
    text = os_error_message(OSError(code, "strerror text", "/some/path"))
    assert text.startswith("/some/path ") and words in text and "[Errno" not in text


def test_a_raw_os_error_reaches_the_user_as_one_sentence(tmp_path, capsys, monkeypatch):
    def fail(args):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x"))
    args = cli.build_parser().parse_args(["plan"])
    monkeypatch.setattr(cli, "build_parser", lambda command=None: _Parser(args, fail))
    rc, err = main(capsys, "plan")
    assert rc == 1 and str(tmp_path / "x") in err and "[Errno" not in err
    assert "give a path you can write" in err


class _Parser:
    def __init__(self, args, func):
        self.args, self.args.func = args, func

    def parse_args(self, argv):
        return self.args


@pytest.mark.parametrize("argv,words", [
    (["--steps", "3", "--warmup", "5"], "warmup=5 (--warmup) must be ≤ steps=3 (--steps)"),
    (["--lr", "0"], "lr=0.0 (--lr) must be > 0"),
    (["--lr", "inf"], "lr=inf (--lr) must be a finite number"),
    (["--seed", "-1"], "seed=-1 (--seed) must be ≥ 0"),
    (["--scheduler", "lwz"], "scheduler='lwz' (--scheduler) is unknown"),
    (["--ooc-size-mb", "8"], "ooc_size_mb=8 (--ooc-size-mb) must be ≥ 16")])
def test_train_options_are_refused_in_the_commands_words(tmp_path, capsys, argv, words):
    rc, err = main(capsys, "train", *argv, "--data", str(tmp_path / "none"), "--out",
                   str(tmp_path / "out"))
    assert rc == 2 and words in err and "total_steps" not in err, err


@pytest.mark.parametrize("name,kw", [
    ("memory_limit_mb", dict(memory_limit_mb=2**32 + 16)),
    ("opencl_memory_limit_mb", dict(nopencl=1, opencl_memory_limit_mb=2**32 + 16)),
    ("ooc_size_mb", dict(memory_limit_mb=64, ooc_dir="/tmp", ooc_size_mb=2**32 + 16)),
    ("memory_limit_mb", dict(memory_limit_mb=2**31))])
def test_a_cap_past_what_starpu_reads_is_refused_not_wrapped(name, kw):
    """StarPU reads its limits as a C int: 2**32 + 16 MiB silently became a 16 MiB cap."""
    import nntile_lab as nl
    with pytest.raises(ValueError, match=rf"{name}={kw[name]} must be an integer from 16 to "
                                         r"2,147,483,647 \(MiB\)"):
        nl.Runtime(ncpu=1, **kw)
    assert nl.Runtime.active is None


def test_an_opencl_cap_below_16_is_a_usage_error_naming_its_option(capsys):
    """--opencl-memory-limit-mb 8 exited 1 with the runtime's words (opencl_memory_limit_mb)."""
    rc, err = main(capsys, "plan", "--nopencl", "1", "--opencl-memory-limit-mb", "8")
    assert rc == 2
    assert ("opencl_memory_limit_mb=8 (--opencl-memory-limit-mb) must be ≥ 16 (MiB)"
            in err), err


def test_a_file_where_a_folder_is_expected_is_named_so(tmp_path, capsys, monkeypatch):
    """A file as a cache or trace folder said "already exists: remove it" (the user's file);
    trace found it out only after its training."""
    f = tmp_path / "a_file"
    f.write_text("x")
    try:
        (f).mkdir()
    except FileExistsError as exc:
        assert os_error_message(exc) == f"{f} is a file where a folder is needed: give a " \
                                        "folder's path"
    from nntile_lab.trace import cli as trace_cli
    monkeypatch.setattr(trace_cli, "run_training", lambda *a, **k: pytest.fail("trained"))
    rc, err = main(capsys, "trace", "--out", str(f), "--steps", "1", "--", "--n-layer", "1")
    assert rc == 2 and f"--out {f} is a file, not a folder" in err
