"""The command line: what scripts rely on (JSON keys, exit codes, clear errors)."""
import json
import subprocess
import sys

import pytest

from nntile_lab import cli
from nntile_lab.engine import read_record
from nntile_lab.spec import ExperimentSpec


def run_json(capsys, *argv) -> dict:
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_gemm_json(capsys):
    res = run_json(capsys, "bench", "gemm", "--n", "256", "--tiles", "128", "64",
                   "--repeats", "1", "--json")
    assert {"nntile_gflops", "numpy_gflops", "ratio", "submit_us_per_task"} <= res.keys()
    assert res["ratio"] == pytest.approx(res["nntile_gflops"] / res["numpy_gflops"])
    assert [r["tile"] for r in res["by_tile"]] == [128, 64]
    assert res["by_tile"][0]["tasks"] == 8 and res["by_tile"][1]["tasks"] == 64


def test_bench_train_vs_torch_json(capsys, tmp_path):
    res = run_json(capsys, "bench", "train", "--vs-torch", "--json", "--n-layer", "1",
                   "--n-head", "2", "--n-embd", "32", "--seq-len", "16", "--batch", "2",
                   "--vocab-size", "100", "--steps", "2", "--no-torch-compile",
                   "--record", str(tmp_path / "bench.json"))
    assert {"nntile_gflops", "torch_gflops", "ratio", "peak_gflops"} <= res.keys()
    assert set(res["torch"]) == {"eager"} and res["torch_best"] == "eager"
    assert res["torch"]["eager"]["model"] == "nanogpt"
    assert res["ratio"] == pytest.approx(res["nntile_gflops"] / res["torch_gflops"])
    assert res["config"]["vocab_tile"] == 100        # the trainer's default tiles, capped
    # built from the spec (the trainer's step: 2 measured steps), recorded with it
    spec = ExperimentSpec(n_layer=1, n_head=2, n_embd=32, seq_len=16, batch=2, vocab_size=100,
                          measure_steps=2)
    assert res["spec"] == spec.to_dict() and len(res["nntile_step_times_s"]) == 2
    assert res["flops_per_step"] == spec.flops_per_step()
    rec = read_record(tmp_path / "bench.json")
    assert rec["kind"] == "bench-train" and rec["spec"] == spec.to_dict()
    assert rec["results"]["nntile_gflops"] == pytest.approx(res["nntile_gflops"])
    assert rec["versions"]["torch"] and rec["machine"]["cores"] and "git_commit" in rec


def test_bad_option_is_one_clear_error(capsys):
    assert cli.main(["bench", "gemm", "--n", "64", "--tiles", "0", "--repeats", "1"]) == 2
    err = capsys.readouterr().err     # argparse's usage error, before any work: one line
    assert err == ("nntile-lab bench gemm: error: argument --tiles: 0 is out of range: give an "
                   "integer from 1 to 2,147,483,647 (see: nntile-lab bench gemm --help)\n")


def test_missing_extension_says_how_to_install():
    code = ("import sys; sys.modules['nntile_lab._ext'] = None\n"
            "import nntile_lab\n"  # loads names on first use: results read without StarPU
            "try:\n    nntile_lab.Runtime\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "apt-get install libstarpu-dev" in out and "pip install -e ." in out


def test_cli_reads_and_plans_without_the_extension():
    """Every command's --help, `plan` and the trace's readers need no compiled extension;
    a command that runs tasks says how to install it."""
    code = """
import sys
sys.modules['nntile_lab._ext'] = None
from nntile_lab import cli
import nntile_lab.trace as tr
from nntile_lab.trace import metrics, viz  # saved traces are read and drawn without StarPU
parser = cli.build_parser()
subs = [a for a in parser._actions if a.__class__.__name__ == '_SubParsersAction'][0]
for name in subs.choices:
    try:
        cli.main([name, '--help'])
    except SystemExit as e:
        assert e.code == 0, (name, e.code)
assert cli.main(['plan', '--n-layer', '2', '--n-embd', '128', '--vocab-size', '1024',
                 '--seq-len', '32', '--batch', '2', '--json']) == 0
try:
    tr.Trace
except ImportError as e:
    print('TRACE-SAYS', e)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"verdict": "fits"' in done.stdout
    assert "TRACE-SAYS" in done.stdout and "apt-get install libstarpu-dev" in done.stdout
