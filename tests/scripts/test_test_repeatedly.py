"""scripts/test_repeatedly.sh (make test-release): its command line. The script itself runs
`make test` N times on a fresh clone (tens of minutes each): run by hand before a release."""
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_repeatedly.sh"


def run(*argv):
    return subprocess.run(["bash", str(SCRIPT), *argv], capture_output=True, text=True,
                          timeout=60)


def test_help_says_what_it_does():
    out = run("--help")
    assert out.returncode == 0
    assert "make test" in out.stdout and "--explore" in out.stdout and "--fast" in out.stdout


@pytest.mark.parametrize("argv,said", [
    (["-n", "0"], "-n 0: give a count ≥ 1"),
    (["-n", "x"], "-n x: give a count ≥ 1"),
    (["--retry"], "unknown option --retry"),
    (["no-such-rev-xyz"], "no-such-rev-xyz is not a commit"),
])
def test_a_bad_command_line_is_one_line_and_exit_2(argv, said):
    out = run(*argv)
    assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1
