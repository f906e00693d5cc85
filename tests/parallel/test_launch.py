"""``nntile-lab train`` beyond one machine: host lists, hostfiles, Slurm's srun, and training
over Open MPI's TCP transport alone (no shared memory), as between two machines."""
import csv
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nntile_lab.errors import UsageError
from nntile_lab.parallel import launch, mpirun
from tests.parallel.test_mpi_tiles import REPO
from tests.torch_adapter import tiny_dataset

OPTS = ["--out", "run", "--steps", "2"]


def test_host_list_goes_to_mpirun_and_sets_the_rank_count():
    cmd = launch.train_command(OPTS + ["--hosts", "a:2,b:2"], None, hosts="a:2,b:2")
    assert cmd[1:3] == ["-n", "4"]
    i = cmd.index("--host")
    assert cmd[i + 1] == "a:2,b:2" and cmd.index("-m") > i       # mpirun's, before the program
    # the ranks' own command line: the launch options gone, one CPU worker each
    assert cmd[cmd.index("train") + 1:] == ["--out", "run", "--steps", "2", "--ncpu", "1"]
    with pytest.raises(UsageError, match="--hosts 'a:x'"):
        launch.train_command(OPTS, None, hosts="a:x")


def test_hostfile(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("node1 slots=2\nnode2 slots=2\n")
    cmd = launch.train_command(OPTS, 4, hostfile=str(hf))
    assert cmd[cmd.index("--hostfile") + 1] == str(hf) and cmd[1:3] == ["-n", "4"]
    # without --ranks, one rank per slot (as with --hosts)
    assert launch.train_command(OPTS, None, hostfile=str(hf))[1:3] == ["-n", "4"]


def test_a_hostfile_carries_the_settings_its_hosts_need(tmp_path):
    """``# mca KEY VALUE`` comment lines (scripts/cluster.sh writes them: the launch agent,
    the network) become mpirun's --mca options; other comments stay comments."""
    hf = tmp_path / "hosts"
    hf.write_text("# a cluster\n# mca plm_rsh_agent /x/agent\n# mca btl tcp,self\n"
                  "a slots=1  # the first\n\nb\n")
    read = mpirun.read_hostfile(str(hf))
    assert read.hosts == (("a", 1), ("b", 1)) and read.slots == 2
    cmd = launch.train_command(OPTS, None, hostfile=str(hf), tcp=True)
    line = " ".join(cmd)
    assert "--mca plm_rsh_agent /x/agent" in line
    # --tcp adds what the file lacks and keeps what it says
    assert "--mca btl tcp,self" in line and "--mca pml ob1" in line and line.count("btl") == 1
    assert line.index("--mca") < line.index(" -m nntile_lab.cli")


@pytest.mark.parametrize("text, said", [
    ("", "lists no host"), ("# only a comment\n\n", "lists no host"),
    ("node1 slots=x\n", "line 1: 'slots=x': slots must be an integer >= 1"),
    ("node1 slots=0\n", "slots must be an integer >= 1")])
def test_bad_hostfiles_are_named(tmp_path, text, said):
    hf = tmp_path / "hosts"
    hf.write_text(text)
    with pytest.raises(UsageError, match=f"--hostfile '{hf}'.*{re.escape(said)}"):
        launch.train_command(OPTS, 4, hostfile=str(hf))


def test_a_missing_hostfile_or_a_directory_is_named(tmp_path):
    with pytest.raises(UsageError, match="--hostfile .*: no such file"):
        launch.train_command(OPTS, 4, hostfile=str(tmp_path / "none"))
    with pytest.raises(UsageError, match=f"--hostfile '{tmp_path}' is a directory"):
        launch.train_command(OPTS, 4, hostfile=str(tmp_path))
    one = tmp_path / "one"
    one.write_text("node1\n")
    with pytest.raises(UsageError, match="1 slot in all; give --ranks N"):
        launch.train_command(OPTS, None, hostfile=str(one))


@pytest.mark.parametrize("value, said", [
    ("abc", "SLURM_NTASKS='abc' (from the environment) is not a whole number"),
    ("1", "SLURM_NTASKS=1 (from the environment): the allocation has 1 task")])
def test_a_bad_slurm_task_count_is_named(value, said):
    with pytest.raises(UsageError, match=re.escape(said)):
        launch.train_command(OPTS, None, launcher="srun",
                             environ={"SLURM_NTASKS": value, "SLURM_JOB_ID": "7"})


def test_srun_outside_slurm_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))        # no srun anywhere
    with pytest.raises(UsageError, match="--launcher srun: there is no srun on PATH"):
        launch.choose_launcher("srun")


def test_print_mpirun_without_ranks_prints_nothing_and_says_why(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train", "--print-mpirun",
                           "--steps", "2"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--print-mpirun prints the launch line of a run on several ranks: give --ranks N" \
        in proc.stderr
    assert not (tmp_path / "runs").exists()          # nothing trained


def test_layout_without_ranks_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train", "--layout", "data",
                           "--steps", "2"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 2 and "--layout data shares the work between ranks" in proc.stderr


def test_srun_takes_the_allocations_task_count():
    cmd = launch.train_command(OPTS + ["--launcher", "srun"], None, launcher="srun",
                               environ={"SLURM_NTASKS": "3", "SLURM_JOB_ID": "7"})
    assert Path(cmd[0]).name == "srun" and cmd[1:3] == ["--ntasks", "3"]
    assert cmd[3] == "--export=ALL,NNTILE_LAB_MPI=1,STARPU_NCPU=1,STARPU_SILENT=1"
    assert cmd[4:8] == [sys.executable, "-m", "nntile_lab.cli", "train"]
    assert "--launcher" not in cmd and "--ncpu" in cmd


def _fake_srun(tmp_path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_auto_picks_srun_inside_an_allocation(tmp_path, monkeypatch):
    env = _fake_srun(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    assert launch.choose_launcher("auto", environ={"SLURM_JOB_ID": "1"}) == "srun"
    assert launch.choose_launcher("auto", environ={}) == "mpirun"
    assert launch.choose_launcher("auto", "a:2", environ={"SLURM_JOB_ID": "1"}) == "mpirun"
    with pytest.raises(UsageError, match="--hosts/--hostfile are for mpirun"):
        launch.choose_launcher("srun", "a:2")


def test_print_the_srun_line_from_the_cli(tmp_path):
    env = _fake_srun(tmp_path) | {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "4",
                                  "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "nntile_lab.cli", "train", "--launcher",
                           "srun", "--print-mpirun", "--steps", "2"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "srun --ntasks 4 --export=ALL,NNTILE_LAB_MPI=1" in proc.stdout
    assert "--launcher" not in proc.stdout and "--print-mpirun" not in proc.stdout


@pytest.mark.parametrize("variable, rank", [("OMPI_COMM_WORLD_RANK", 2), ("SLURM_PROCID", 3),
                                            ("PMIX_RANK", 1)])
def test_rank_from_any_launcher(monkeypatch, variable, rank):
    for name in launch.RANK_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, str(rank))
    assert launch.rank() == rank


def _losses(run: Path) -> list[float]:
    with open(run / "log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r.get("loss")]


@pytest.mark.slow
def test_training_over_tcp_only_equals_one_process(tmp_path):
    """Two ranks whose only transport is TCP (``--tcp``: pml ob1, btl tcp,self) train to the
    one-process losses; with the TCP transport taken away the same launch cannot start, so
    the ranks had no other path (shared memory) to talk over."""
    data = tiny_dataset(tmp_path / "data")
    opts = ["--data", str(data), "--n-layer", "1", "--n-head", "2", "--n-embd", "32",
            "--vocab-size", "64", "--seq-len", "16", "--batch", "4", "--steps", "3",
            "--eval-every", "3", "--eval-batches", "1", "--embd-tile", "16",
            "--vocab-tile", "32", "--batch-tile", "2", "--no-progress", "--scheduler", "eager"]
    env = {"PYTHONPATH": str(REPO), "STARPU_SILENT": "1", "PATH": os.environ["PATH"]}
    cli = [sys.executable, "-m", "nntile_lab.cli", "train"]
    line = subprocess.run(cli + opts + ["--ranks", "2", "--tcp", "--print-mpirun"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert "--mca pml ob1 --mca btl tcp,self" in line.stdout, line.stdout + line.stderr
    one = subprocess.run(cli + opts + ["--ncpu", "1", "--out", "one"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=180)
    assert one.returncode == 0, one.stderr[-3000:]
    tcp = subprocess.run(cli + opts + ["--ranks", "2", "--tcp", "--out", "tcp"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert tcp.returncode == 0, tcp.stderr[-3000:]
    a, b = _losses(tmp_path / "one"), _losses(tmp_path / "tcp")
    assert len(a) == 3 and len(b) == 3
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)
    # the control: the same two ranks with only the "self" transport cannot reach each other
    none = subprocess.run(cli + opts + ["--ranks", "2", "--out", "none"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path,
                          env=env | {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self"})
    assert none.returncode != 0
    said = " ".join((none.stdout + none.stderr).split())
    assert ("MPI could not start the 2 ranks (MPI_Init failed): they are unable to reach each "
            "other with OMPI_MCA_btl=self") in said, said[-3000:]


# What Open MPI printed in CI when the ranks could not reach each other: the help text without
# the words "MPI_Init", after show_help's own unpack errors; and the variant where only those
# unpack errors survive.
UNREACHABLE = """[vm:04225] [[31871,0],0] ORTE_ERROR_LOG: Data unpack would read past end \
of buffer in file ../../../orte/util/show_help.c at line 507
--------------------------------------------------------------------------
At least one pair of MPI processes are unable to reach each other for
MPI communications.  This means that no Open MPI device has indicated
that it can be used to communicate between these processes.
--------------------------------------------------------------------------
"""
HELP_LOST = UNREACHABLE.splitlines()[0] + "\n"


@pytest.mark.parametrize("printed", [UNREACHABLE, HELP_LOST])
def test_ranks_dying_at_start_end_with_one_line_saying_why(tmp_path, monkeypatch, capsys, printed):
    fake = tmp_path / "mpirun"
    (tmp_path / "said").write_text(printed)
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'said'} >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("OMPI_MCA_btl", "self")
    log = tmp_path / "run" / "mpirun.log"
    assert launch.run_ranks([str(fake)], 2, log_path=str(log)) == 1
    raw = capsys.readouterr().err
    err = " ".join(raw.split())
    assert ("MPI could not start the 2 ranks (MPI_Init failed): they are unable to reach each "
            "other with OMPI_MCA_btl=self. Fix:") in err
    # Open MPI's own lines go to the log, not the terminal: one line says it all
    assert len(raw.splitlines()) == 1 and f"(Open MPI's messages: {log})" in err
    assert log.read_text() == printed


def test_a_rank_failing_later_gets_no_mpi_init_line(tmp_path, capsys):
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/sh\necho 'Traceback: ValueError: bad --lr' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert launch.run_ranks([str(fake)], 2) == 1
    err = capsys.readouterr().err
    assert "bad --lr" in err and "MPI could not start" not in err
